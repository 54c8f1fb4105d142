/**
 * A TCP proxy a test controls, put between the service and PostgreSQL or Redis to make an outage without
 * touching the shared servers: it forwards, cuts every open connection (both sides destroyed, as when a
 * network path or a server dies), refuses new connections (accepted and closed at once) until restored,
 * and can hold back what the server answers (a reply lost on the way: the server did the work, the client
 * never hears of it).
 */
import { once } from 'node:events'
import { connect, createServer, type Server, type Socket } from 'node:net'

export class TcpProxy {
  private readonly pairs = new Set<{ client: Socket; upstream: Socket; held: boolean }>()
  private refusing = false
  private holding = false
  private holdMarker: string | undefined
  /** Connections accepted since the start, and how many of them were refused. */
  readonly counts = { accepted: 0, refused: 0 }

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** Listens on a free loopback port and forwards each connection to `target`. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const server = createServer()
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const proxy = new TcpProxy(server, (server.address() as { port: number }).port)
    server.on('connection', (client) => proxy.accept(client, target))
    return proxy
  }

  /** `url` (postgresql://…, redis://…) with its host and port replaced by the proxy's. */
  static async inFrontOf(url: string): Promise<{ proxy: TcpProxy; url: string }> {
    const parsed = new URL(url)
    const proxy = await TcpProxy.start({ host: parsed.hostname, port: Number(parsed.port) })
    parsed.hostname = '127.0.0.1'
    parsed.port = String(proxy.port)
    return { proxy, url: parsed.toString() }
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    this.counts.accepted++
    client.on('error', () => {})
    if (this.refusing) {
      this.counts.refused++
      client.destroy()
      return
    }
    const upstream = connect(target.port, target.host)
    upstream.on('error', () => {})
    const pair = { client, upstream, held: false }
    this.pairs.add(pair)
    const end = () => {
      this.pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('close', end)
    upstream.on('close', end)
    client.on('data', (chunk: Buffer) => {
      if (this.holdMarker !== undefined && chunk.includes(this.holdMarker)) pair.held = true
      upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      if (!this.holding && !pair.held) client.write(chunk)
    })
  }

  /** Open connections through the proxy. */
  get open(): number {
    return this.pairs.size
  }

  /** Destroys both sides of every open connection. */
  cut(): void {
    for (const { client, upstream } of this.pairs) {
      client.destroy()
      upstream.destroy()
    }
    this.pairs.clear()
  }

  /** Cuts every open connection and closes each new one at once, until restore(). */
  refuse(): void {
    this.refusing = true
    this.cut()
  }

  /** What the server sends is dropped (not forwarded) until restore(); requests still reach it. */
  holdReplies(): void {
    this.holding = true
  }

  /**
   * On each connection, what the server sends is dropped from the moment the client sends bytes holding `marker`
   * (a statement's text), until that connection ends: the statement runs, its answer never arrives.
   */
  holdRepliesTo(marker: string): void {
    this.holdMarker = marker
  }

  /** Forwards again (connections already held stay held: a lost answer does not come back). */
  restore(): void {
    this.refusing = false
    this.holding = false
    this.holdMarker = undefined
  }

  async close(): Promise<void> {
    this.refuse()
    this.server.close()
    await once(this.server, 'close')
  }
}
