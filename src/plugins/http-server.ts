/**
 * How the HTTP server meets the wire: the router's limits, the server's timeouts (options passed to Fastify
 * when the app is built, src/app.ts), and problem+json for the errors answered before any route runs, by
 * the router (a path it cannot decode, a parameter too long) or by Node's HTTP server (malformed or
 * oversized request heads, timeouts, a missing Host, an unknown Expect), which Fastify and Node would
 * otherwise answer with bodies of their own or none.
 */
import type { FastifyError, FastifyHttpOptions, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { readdirSync, readFileSync } from 'node:fs'
import type { Socket } from 'node:net'
import { notFound, type AppError } from '../errors/app-error.js'
import {
  badPercentEncoding,
  badRequest,
  expectationFailed,
  headersTooLarge,
  invalidHost,
  missingHost,
  requestTimeout,
  uriTooLong,
  userinfoInTarget,
} from '../errors/http-errors.js'
import { replyWithError, sendProblem } from './errors.js'
import { timesSent } from './raw-headers.js'
import { API_HEADERS } from './api-headers.js'
import { hasUserinfo, isApiRequest, requestedHost } from './request-target.js'
import { notFoundPage } from '../redirects/pages/index.js'
import { sendPage } from '../redirects/respond.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

/**
 * The longest path parameter the router takes (Fastify's default, 100, refused ordinary long domains). A
 * domain in the path may be a host name of 253 characters, and clients may send an internationalised one
 * in its Unicode form, percent-encoded: up to 12 characters (4 UTF-8 bytes) for each character of a label,
 * about 3,000 for the longest host name. A longer parameter is 414 uri_too_long.
 */
export const MAX_PARAM_LENGTH = 4096

/** Whether a segment of the URL's path is longer than a path parameter may be (cheap for the usual short URL). */
function hasOverlongSegment(url: string): boolean {
  if (url.length <= MAX_PARAM_LENGTH) return false
  const queryAt = url.indexOf('?')
  const path = queryAt === -1 ? url : url.slice(0, queryAt)
  return path.split('/').some((segment) => segment.length > MAX_PARAM_LENGTH)
}

export interface HttpTimeouts {
  /** The request line and headers must have arrived this long after the request began, else 408. */
  headersMs: number
  /**
   * The whole request, body included, must have arrived this long after it began, else 408. Node's
   * default is 300 s and Fastify's is none: a client sending its body a byte at a time (a slow-loris
   * upload) would hold a connection for that long. 64 KiB bodies need nowhere near 30 s.
   */
  requestMs: number
  /**
   * A connection with no traffic at all for this long is closed: one that never sends a request, or a
   * request whose handler hangs. Above anything a handler waits for (the autofill fetch, the database).
   */
  idleMs: number
  /** How often Node checks the two request timeouts (its default, 30 s, would let them run 30 s over). */
  checkIntervalMs: number
}

export const HTTP_TIMEOUTS: HttpTimeouts = { headersMs: 10_000, requestMs: 30_000, idleMs: 60_000, checkIntervalMs: 1_000 }

/**
 * A Host value as RFC 9112 section 3.2 allows it: an IP literal or a registered name (RFC 3986's characters, no
 * `@`, `/` or space), then an optional port. Anything else (`user@go.brand.com`, `go.brand.com/x`) is refused
 * rather than read as some host.
 */
const VALID_HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]*)(?::[0-9]*)?$/

/**
 * What is wrong with how the request names its host, if anything: user information in an absolute-form target (RFC
 * 9110 section 4.2.4), or its Host header (RFC 9112 section 3.2).
 */
function hostProblem(request: FastifyRequest): AppError | null {
  if (!request.url.startsWith('/') && hasUserinfo(request.url)) return userinfoInTarget()
  const { host } = request.headers
  // HTTP/1.0 may go without one.
  if (host === undefined) return request.raw.httpVersion === '1.1' ? missingHost() : null
  // More than one (RFC 9112 section 3.2: a 400): a proxy that reads the last would route the request elsewhere.
  if (!VALID_HOST.test(host) || timesSent(request.raw.rawHeaders, 'host') > 1) return invalidHost()
  return null
}

/** Whether the request is for a short domain (a visitor's address), once the visitor routes are registered. */
function onShortDomain(request: FastifyRequest): boolean {
  const app = request.server
  return app.hasDecorator('redirects') && app.redirects.domains.hostOf(requestedHost(request)) !== null
}

function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // These requests skip the app's hooks, so the headers the others carry are set here.
  reply.header('x-request-id', request.id)
  if (isApiRequest(request.url)) reply.headers(API_HEADERS)
  // A visitor's address that cannot be decoded names no link: the page of a link that does not exist, as for
  // any other unknown address of a short domain, not an API problem.
  if (error.code === 'FST_ERR_BAD_URL' && onShortDomain(request)) return sendPage(reply, notFoundPage())
  const known: Record<string, () => AppError> = {
    FST_ERR_BAD_URL: badPercentEncoding,
    FST_ERR_MAX_PARAM_LENGTH: () => uriTooLong(MAX_PARAM_LENGTH),
  }
  const appError = known[error.code]?.()
  if (!appError) return replyWithError(error, request, reply)
  request.log.info({ code: appError.code, status: appError.status }, appError.detail)
  return sendProblem(reply, appError)
}

/** Node's HTTP parser error codes (and its request timeout) as the problem a client gets. */
function clientProblem(error: NodeJS.ErrnoException): AppError {
  if (error.code === 'HPE_HEADER_OVERFLOW') return headersTooLarge()
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return requestTimeout()
  return badRequest('The request is not valid HTTP/1.1')
}

/** A problem as raw HTTP/1.1, for the answers written where Fastify has no reply object. */
function rawProblem(problem: AppError): { head: Record<string, string>; body: string } {
  const body = JSON.stringify(problem.toProblem())
  const head = {
    'content-type': 'application/problem+json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    ...problem.headers,
    connection: 'close',
  }
  return { head, body }
}

/**
 * A request Node's parser refused, or one too slow, has no request or reply object: the answer is written
 * on the socket, which is then closed (the rest of the stream cannot be trusted to be a next request).
 */
function answerClientError(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const problem = clientProblem(error)
  this.log.info({ code: problem.code, status: problem.status, reason: error.code }, problem.detail)
  // As Node does: answer only when no response is already under way on this connection.
  const responding = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage?.headersSent
  if (!socket.writable || responding) {
    socket.destroy()
    return
  }
  // An answer to HEAD has no body (RFC 9110 section 9.3.2). The parser's data at hand starts with the request line
  // when the request came in one piece, as one of a size Node refuses mostly does.
  const rawPacket = (error as NodeJS.ErrnoException & { rawPacket?: Buffer }).rawPacket
  endWithProblem(socket, problem, rawPacket?.subarray(0, 5).toString('latin1') === 'HEAD ')
}

/** Writes the problem as a whole HTTP answer on the socket (its body left out for a HEAD), then closes it. */
function endWithProblem(socket: Socket, problem: AppError, toHead = false): void {
  const { head, body } = rawProblem(problem)
  const lines = Object.entries(head).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  socket.end(
    `HTTP/1.1 ${problem.status} ${problem.toProblem().title}\r\n${lines}\r\n${toHead ? '' : body}`,
    // Closed only once the answer is handed to the kernel, so it is not lost with the socket.
    () => socket.destroy(),
  )
}

/** The Fastify options of the HTTP server; `timeouts` overrides are for tests. */
export function httpServerOptions(timeouts: Partial<HttpTimeouts> = {}) {
  const { headersMs, requestMs, idleMs, checkIntervalMs } = { ...HTTP_TIMEOUTS, ...timeouts }
  return {
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: answerFrameworkError,
    clientErrorHandler: answerClientError,
    requestTimeout: requestMs,
    connectionTimeout: idleMs,
    http: { headersTimeout: headersMs, connectionsCheckingInterval: checkIntervalMs, requireHostHeader: false },
  } satisfies FastifyHttpOptions<Server>
}

/** The process's limit of open files (the soft one, which Node raises to the hard one as it starts), where known. */
function openFileLimit(): number | null {
  try {
    const soft = /^Max open files\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1]
    return soft === undefined || soft === 'unlimited' ? null : Number(soft)
  } catch {
    return null
  }
}

/** Files the process has open now (the database's included, embedded or its connections), where known. */
function openFiles(): number {
  try {
    return readdirSync('/proc/self/fd').length
  } catch {
    return 0
  }
}

/**
 * The most client connections the server holds at once: its open-file limit less what is open already (the
 * database, Redis, the modules) and a reserve (a quarter of the limit, at most 1,024) for what opens later: new
 * database and Redis connections, autofill's fetches, the embedded database's files. A process at its limit can
 * open nothing: its database connections fail, and so did its memory reading (src/plugins/overload.ts). Past the
 * cap Node drops a new connection at once (logged once a minute) and the process serves the others. Null where
 * the limit is not known (no /proc) or unlimited.
 */
export function connectionCap(fileLimit = openFileLimit(), open = openFiles()): number | null {
  if (fileLimit === null || !Number.isFinite(fileLimit)) return null
  return Math.max(16, fileLimit - open - Math.min(1024, Math.floor(fileLimit / 4)))
}

/** The part options cannot say: Node's own bodiless answers to a missing Host and to an unknown Expect. */
export default fp(
  async function httpServer(app: FastifyInstance) {
    const cap = connectionCap()
    if (cap !== null) app.server.maxConnections = cap
    let dropped = 0
    const dropWarning = new OccasionalWarning()
    app.server.on('drop', () => {
      dropped++
      if (dropWarning.occurred() === null) return
      app.log.warn({ maxConnections: cap, dropped }, 'connections: at the most this process can hold (its open-file limit); new ones are dropped')
    })
    // The header checks (one Host, one Idempotency-Key) read every header; Node keeps only the first 2,000 by
    // default, so one sent after them went unseen. The 16 KiB header limit still bounds how many there can be.
    app.server.maxHeadersCount = 0
    // CONNECT (a proxy's tunnel) is no request of this service: Node closes the socket without a word unless it is
    // listened for; answered like any path the service does not have.
    app.server.on('connect', (_request: IncomingMessage, socket: Socket) => endWithProblem(socket, notFound('route')))
    // Node answers an Expect other than 100-continue with a bare 417 unless the server listens for it.
    app.server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
      const problem = expectationFailed()
      app.log.info({ code: problem.code, status: problem.status }, problem.detail)
      const { head, body } = rawProblem(problem)
      response.writeHead(problem.status, head).end(body)
    })
    // RFC 9112 requires one valid Host on HTTP/1.1; Node's check (requireHostHeader, off in the options) answers a
    // bare 400 to a missing one and lets the others through.
    // The router reports a parameter over maxParamLength only when no other route matches, and the visitor
    // route `/:slug` matches any one segment, so an overlong segment is refused here, before routing counts.
    // A callback hook: it runs on every request, visits included.
    app.addHook('onRequest', (request, reply, done) => {
      const problem = hostProblem(request)
      if (problem !== null) sendProblem(reply, problem)
      else if (hasOverlongSegment(request.url)) sendProblem(reply, uriTooLong(MAX_PARAM_LENGTH))
      else done()
    })
  },
  { name: 'http-server' },
)
