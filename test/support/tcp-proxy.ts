/**
 * A TCP proxy a test controls, put between the service and PostgreSQL or Redis to make an outage without
 * touching the shared servers: it forwards, cuts every open connection (both sides destroyed, as when a
 * network path or a server dies), refuses new connections (accepted and closed at once) until restored,
 * can make what the server answers arrive late, and can hold back what the server answers (a reply lost on the way: the server did the work, the client
 * never hears of it).
 */
import { once } from 'node:events'
import { connect, createServer, type Server, type Socket } from 'node:net'

export class TcpProxy {
  private readonly pairs = new Set<{ client: Socket; upstream: Socket; held: boolean }>()
  /** In front of PostgreSQL, statements are recognised by their text even when prepared (see PostgresStatements). */
  private postgres = false
  private refusing = false
  private holding = false
  private delayMs = 0
  private holdMarker: string | undefined
  /** Connections accepted since the start, and how many of them were refused. */
  readonly counts = { accepted: 0, refused: 0 }

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** Listens on a free loopback port and forwards each connection to `target`. */
  static async start(target: { host: string; port: number }, options: { postgres?: boolean } = {}): Promise<TcpProxy> {
    const server = createServer()
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const proxy = new TcpProxy(server, (server.address() as { port: number }).port)
    proxy.postgres = options.postgres ?? false
    server.on('connection', (client) => proxy.accept(client, target))
    return proxy
  }

  /** `url` (postgresql://…, redis://…) with its host and port replaced by the proxy's. */
  static async inFrontOf(url: string): Promise<{ proxy: TcpProxy; url: string }> {
    const parsed = new URL(url)
    const postgres = parsed.protocol === 'postgresql:' || parsed.protocol === 'postgres:'
    const proxy = await TcpProxy.start({ host: parsed.hostname, port: Number(parsed.port) }, { postgres })
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
    const statements = this.postgres ? new PostgresStatements() : undefined
    client.on('data', (chunk: Buffer) => {
      // Read whether or not a marker is set: a statement prepared now may be the one held later.
      const texts = statements?.read(chunk)
      const marker = this.holdMarker
      if (marker !== undefined && (texts ? texts.some((text) => text.includes(marker)) : chunk.includes(marker))) pair.held = true
      upstream.write(chunk)
    })
    // Delayed answers wait in one queue per connection, so that none overtakes another (RESP and PostgreSQL's
    // protocol match answers to requests by their order).
    const delayed: { at: number; chunk: Buffer }[] = []
    let timer: NodeJS.Timeout | undefined
    const flush = () => {
      timer = undefined
      while (delayed.length > 0 && delayed[0].at <= Date.now()) client.write(delayed.shift()!.chunk)
      if (delayed.length > 0) timer = setTimeout(flush, delayed[0].at - Date.now())
    }
    upstream.on('data', (chunk: Buffer) => {
      if (this.holding || pair.held) return
      if (this.delayMs === 0 && delayed.length === 0) return void client.write(chunk)
      delayed.push({ at: Math.max(Date.now() + this.delayMs, delayed.at(-1)?.at ?? 0), chunk })
      timer ??= setTimeout(flush, delayed[0].at - Date.now())
    })
  }

  /** Open connections whose answers are held since they sent the marker of holdRepliesTo. */
  get held(): number {
    return [...this.pairs].filter((pair) => pair.held).length
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

  /** What the server sends arrives `ms` late (a slow server, a congested path), until restore(). */
  delayReplies(ms: number): void {
    this.delayMs = ms
  }

  /** What the server sends is dropped (not forwarded) until restore(); requests still reach it. */
  holdReplies(): void {
    this.holding = true
  }

  /**
   * On each connection, what the server sends is dropped from the moment the client sends bytes holding `marker`
   * (in front of PostgreSQL: runs a statement whose text holds it, prepared or not), until that connection ends:
   * the statement runs, its answer never arrives.
   */
  holdRepliesTo(marker: string): void {
    this.holdMarker = marker
  }

  /** Forwards again (connections already held stay held: a lost answer does not come back). */
  restore(): void {
    this.refusing = false
    this.holding = false
    this.delayMs = 0
    this.holdMarker = undefined
  }

  async close(): Promise<void> {
    this.refuse()
    this.server.close()
    await once(this.server, 'close')
  }
}

const SSL_REQUEST = 80877103
const GSS_ENCRYPTION_REQUEST = 80877104

/**
 * The statements a PostgreSQL client runs on one connection, read from what it sends (the frontend protocol: a
 * startup message, then messages of a type byte and a length): a simple query's text, an extended query's text
 * when it is parsed, and a prepared statement's text again each time it is bound, since once a statement is
 * prepared on a connection only its name travels.
 */
class PostgresStatements {
  private pending: Buffer = Buffer.alloc(0)
  private started = false
  private readonly prepared = new Map<string, string>()

  /** The texts of the statements in the messages that `chunk` completes. */
  read(chunk: Buffer): string[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    const texts: string[] = []
    for (;;) {
      if (!this.started) {
        // Length, then a code: a request for TLS (answered by one byte, then the startup) or the startup itself.
        if (this.pending.length < 8 || this.pending.length < this.pending.readInt32BE(0)) break
        const code = this.pending.readInt32BE(4)
        this.pending = this.pending.subarray(this.pending.readInt32BE(0))
        if (code !== SSL_REQUEST && code !== GSS_ENCRYPTION_REQUEST) this.started = true
        continue
      }
      if (this.pending.length < 5 || this.pending.length < 1 + this.pending.readInt32BE(1)) break
      const type = String.fromCharCode(this.pending[0])
      const body = this.pending.subarray(5, 1 + this.pending.readInt32BE(1))
      this.pending = this.pending.subarray(1 + this.pending.readInt32BE(1))
      const [first, second] = cStrings(body, 2)
      if (type === 'Q') texts.push(first)
      else if (type === 'P') {
        // Parse: the statement's name ('' for unnamed), then its text.
        this.prepared.set(first, second)
        texts.push(second)
      } else if (type === 'B') {
        // Bind: the portal's name, then the statement's; an unnamed statement was reported when parsed.
        const text = second === '' ? undefined : this.prepared.get(second)
        if (text !== undefined) texts.push(text)
      }
    }
    return texts
  }
}

/** The first `count` NUL-terminated strings of `body`. */
function cStrings(body: Buffer, count: number): string[] {
  const strings: string[] = []
  let start = 0
  while (strings.length < count && start < body.length) {
    const end = body.indexOf(0, start)
    if (end < 0) break
    strings.push(body.toString('utf8', start, end))
    start = end + 1
  }
  return strings
}
