/**
 * Latency under a steady load: requests sent at evenly spaced instants (`rate` a second) over up to
 * `connections` keep-alive connections, each one's latency measured from the instant it was due, so a request
 * that waits behind a slow one counts its wait (no coordinated omission).
 *
 * autocannon's `overallRate` is no steady load: it gives each connection its share of a second, which the
 * connection sends back to back as soon as the second starts, then idles; and it adds synthetic samples for
 * every answer slower than 1 ms. Its p99 "at half rate" is the p99 of bursts at full speed.
 *
 * The client is plain sockets with a minimal HTTP/1.1 reader (status line, Content-Length, one request at a time
 * per connection), a few microseconds a request, so that at tens of thousands of requests a second the load
 * generator, which shares the machine, is not what the latency measures. What it cannot read (an answer without
 * Content-Length, bytes nobody asked for) counts as an error and closes that connection, as does a request
 * unanswered after REQUEST_DEADLINE_MS; a connection the server closed is opened again. Due instants are checked every
 * millisecond (a timer): a request leaves at most about a millisecond late on an idle machine, alike for every
 * server measured.
 */
import { connect, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

export interface SteadyRequest {
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE'
  path: string
  headers?: Record<string, string>
  body?: string
  /** The status the request should get; any other is counted in `unexpected`. */
  expect?: number
}

export interface SteadyResult {
  /** Answers a second, over the time from the first due instant to the last answer. */
  rps: number
  p50: number
  p99: number
  /** Answers by status. */
  statuses: Record<number, number>
  /** Answers whose status was not the one their request expects, by status. */
  unexpected: Record<number, number>
  /** Requests that got no answer (the connection failed or closed first). */
  errors: number
}

interface Pending {
  due: number
  request: SteadyRequest
}

const percentile = (sorted: Float64Array, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]

function encode({ method = 'GET', path, headers = {}, body }: SteadyRequest): string {
  let head = `${method} ${path} HTTP/1.1\r\n`
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`
  if (!Object.keys(headers).some((name) => name.toLowerCase() === 'host')) head += 'host: localhost\r\n'
  if (body !== undefined) head += `content-length: ${Buffer.byteLength(body)}\r\n`
  return `${head}\r\n${body ?? ''}`
}

const HEADERS_END = Buffer.from('\r\n\r\n')

/** A request unanswered for this long counts as an error (autocannon's default timeout). */
const REQUEST_DEADLINE_MS = 10_000

/**
 * The whole answer's length and status, once `received` holds its head; undefined before; null for an answer
 * this reader cannot delimit (chunked, or a body without Content-Length).
 */
function answerIn(received: Buffer): { status: number; length: number } | undefined | null {
  const end = received.indexOf(HEADERS_END)
  if (end < 0) return undefined
  const head = received.toString('latin1', 0, end)
  const status = Number(head.slice(9, 12))
  const declared = /\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1]
  const bodiless = status === 204 || status === 304 || (status >= 100 && status < 200)
  if (declared === undefined && !bodiless) return null
  return { status, length: end + 4 + Number(declared ?? 0) }
}

/** One keep-alive connection, one request at a time. */
class Connection {
  private readonly socket: Socket
  private current: Pending | undefined
  private sentAt = 0
  private received: Buffer = Buffer.alloc(0)

  private constructor(
    socket: Socket,
    private readonly answer: (pending: Pending, status: number) => void,
    private readonly lost: (pending: Pending | undefined) => void,
  ) {
    this.socket = socket
    socket.on('data', (chunk: Buffer) => this.read(chunk))
    socket.on('close', () => this.lost(this.current))
  }

  static open(host: string, port: number, answer: Connection['answer'], lost: Connection['lost']): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port, noDelay: true })
      socket.once('connect', () => {
        socket.off('error', reject)
        socket.on('error', () => {})
        resolve(new Connection(socket, answer, lost))
      })
      socket.once('error', reject)
    })
  }

  send(pending: Pending): void {
    this.current = pending
    this.sentAt = performance.now()
    this.socket.write(encode(pending.request))
  }

  /** Closes the connection if its request has waited longer than the deadline (counted lost as it closes). */
  expireIfLate(now: number): void {
    if (this.current && now - this.sentAt > REQUEST_DEADLINE_MS) this.socket.destroy()
  }

  close(): void {
    this.current = undefined
    this.socket.destroy()
  }

  private read(chunk: Buffer): void {
    this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk])
    const answer = answerIn(this.received)
    // Unreadable, or more than one answer (bytes nobody asked for): the connection is closed, its request lost.
    if (answer === null || !this.current || (answer && this.received.length > answer.length)) return void this.socket.destroy()
    if (!answer || this.received.length < answer.length) return
    const pending = this.current
    this.current = undefined
    this.received = Buffer.alloc(0)
    this.answer(pending, answer.status)
  }
}

export async function steadyLoad(
  origin: string,
  options: { rate: number; seconds: number; connections: number; next: () => SteadyRequest },
): Promise<SteadyResult> {
  const host = new URL(origin).hostname
  const port = Number(new URL(origin).port)
  const total = Math.floor(options.rate * options.seconds)
  const interval = 1000 / options.rate
  const latencies = new Float64Array(total)
  const statuses: Record<number, number> = {}
  const unexpected: Record<number, number> = {}
  let errors = 0
  let answered = 0
  let settled = 0
  let finished = false
  let allSettled = () => {}
  const done = new Promise<void>((resolve) => (allSettled = resolve))
  const settle = () => {
    if (++settled === total) allSettled()
  }
  const queue: Pending[] = []
  const idle: Connection[] = []
  const all = new Set<Connection>()
  const dispatch = (pending: Pending) => {
    const connection = idle.pop()
    if (connection) connection.send(pending)
    else queue.push(pending)
  }
  const ready = (connection: Connection) => {
    const next = queue.shift()
    if (next) connection.send(next)
    else idle.push(connection)
  }
  const open = async (): Promise<void> => {
    const connection: Connection = await Connection.open(
      host,
      port,
      (pending, status) => {
        latencies[answered++] = performance.now() - pending.due
        statuses[status] = (statuses[status] ?? 0) + 1
        if (pending.request.expect !== undefined && status !== pending.request.expect) unexpected[status] = (unexpected[status] ?? 0) + 1
        settle()
        ready(connection)
      },
      (pending) => {
        // Closed (by the server, or here): its request is lost, and a new connection takes its place.
        all.delete(connection)
        const index = idle.indexOf(connection)
        if (index >= 0) idle.splice(index, 1)
        if (pending) fail()
        if (!finished) reopen()
      },
    )
    // Opened after the run ended (to replace one lost at its end): not needed.
    if (finished) return connection.close()
    all.add(connection)
    ready(connection)
  }
  const fail = () => {
    errors++
    settle()
  }
  let opening = 0
  const reopen = () => {
    opening++
    open()
      .catch(() => {})
      .finally(() => opening--)
  }
  // Every connection opened before the clock starts.
  for (let i = 0; i < options.connections; i++) await open()
  // Late requests are given up on; with no connection left and none opening, what waits can never be sent.
  const sweep = setInterval(() => {
    const now = performance.now()
    for (const connection of all) connection.expireIfLate(now)
    if (all.size === 0 && opening === 0) queue.splice(0).forEach(fail)
    if (all.size + opening < options.connections && !finished) reopen()
  }, 250)

  const start = performance.now()
  for (let sent = 0; sent < total; ) {
    const now = performance.now()
    for (; sent < total && start + sent * interval <= now; sent++) dispatch({ due: start + sent * interval, request: options.next() })
    if (sent < total) await sleep(1)
  }
  await done
  const elapsed = (performance.now() - start) / 1000
  finished = true
  clearInterval(sweep)
  for (const connection of all) connection.close()
  const sorted = latencies.subarray(0, answered).sort()
  return { rps: answered / elapsed, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), statuses, unexpected, errors }
}
