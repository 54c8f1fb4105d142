/**
 * Closing without resetting connections (SIGTERM, src/server.ts). Node's server.close(), which Fastify's
 * close calls, destroys at once every connection on which no request has begun: requests a client had sent
 * but the server had not read yet were reset, with no way for the client to know whether they were done.
 * Here, from the moment the app begins to close:
 * - a request that arrives is answered 503 unavailable with Retry-After, as problem+json;
 * - every answer carries Connection: close, so each connection ends with the request it serves;
 * - the server keeps accepting and reading for `idleGraceMs` at least, and until every connection has closed or
 *   sent nothing for `idleGraceMs` (at most `limitMs` in all), so what was sent before the signal is read and
 *   answered;
 * - then it stops accepting (the listening socket alone: Node's http close would also destroy the connections
 *   just accepted whose request it has not read yet), reads and answers what those last connections sent, and
 *   closes the quiet connections left; Fastify closes the server as before. (Connections the kernel had
 *   completed but Node not yet accepted when the listening socket closes are reset by the kernel: a window of
 *   about a millisecond that no server can close.)
 * - a request still going `busyLimitMs` after the close began has its work interrupted (`interrupt`: the
 *   database's connections in use are ended, so a request waiting for a database that stopped answering is
 *   answered 503 at once, as when its connection breaks), and a moment later its connection is closed if it still
 *   goes (a client sending its body a byte at a time), so the close ends in time to write the buffered visits
 *   before the process is killed.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Server as NetServer, type Socket } from 'node:net'
import { shuttingDown } from '../errors/http-errors.js'
import { sendProblem } from './errors.js'

export interface DrainOptions {
  /** How long a connection may stay quiet after the close began before it is closed unanswered. */
  idleGraceMs: number
  /**
   * The longest the drain waits for requests in flight; then the server closes (Node still lets those
   * requests finish). Under the grace src/server.ts gives the whole close (10 s) before it exits anyway.
   */
  limitMs: number
  /** When the work of requests still going is interrupted, counted from the beginning of the close. */
  busyLimitMs: number
}

declare module 'fastify' {
  interface FastifyInstance {
    /** When the close began (Date.now()), or null while the app is not closing. */
    closingSince: number | null
    /**
     * Calls `listener` as the close begins, before the drain: for what must stop at once (requests waiting for a
     * place), where a preClose hook of its own would run only once the drain is over.
     */
    onClosing(listener: () => void): void
  }
}

/** How long the answers of interrupted requests have to be written before their connections are closed. */
const INTERRUPTED_ANSWERS_MS = 250

/**
 * Within the 10 s src/server.ts gives the whole close: accepting for up to 4 s, the last connections' requests
 * read by 5.5 s, the busy ones cut at 6 s, then writing the buffered visits (src/plugins/visits.ts) until
 * VISIT_WRITES_BY_MS (for 3 s at most when the database refuses them), half a second for a rollup under way and
 * half a second for the database's connections to close: about 9.5 s at most.
 */
export const DRAIN: DrainOptions = { idleGraceMs: 1_000, limitMs: 4_000, busyLimitMs: 6_000 }
/** Until when, counted from the beginning of the close, the buffered visits may be waited for. */
export const VISIT_WRITES_BY_MS = 8_500
/** How long the connections accepted last may take to send their request once the server stops accepting. */
const LAST_CONNECTIONS_MS = 1_500

interface ConnectionState {
  /** Requests read and not yet answered. */
  requests: number
  /** When the connection last had no request going: its opening, or its last answer. */
  quietSince: number
}

/**
 * Resolves in the event loop's check phase, after a poll phase: by then Node has read what the sockets held,
 * even after the loop was blocked for longer than the grace (timers run before the poll phase).
 */
const afterNextReads = () => new Promise<void>((resolve) => setTimeout(() => setImmediate(resolve), 25))

export default fp(
  async function gracefulClose(app: FastifyInstance, options: Partial<DrainOptions> & { interrupt?: () => void }) {
    const { idleGraceMs, limitMs, busyLimitMs } = { ...DRAIN, ...options }
    const connections = new Map<Socket, ConnectionState>()
    let closing = false

    app.server.on('connection', (socket: Socket) => {
      connections.set(socket, { requests: 0, quietSince: Date.now() })
      socket.once('close', () => connections.delete(socket))
    })
    app.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      const state = connections.get(request.socket)
      if (!state) return
      state.requests++
      response.once('close', () => {
        state.requests--
        state.quietSince = Date.now()
      })
    })

    // Callback hooks, not async ones: they run on every request, visits included, and a promise costs more.
    app.addHook('onRequest', (_request, reply, done) => {
      if (closing) sendProblem(reply, shuttingDown())
      else done()
    })
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (closing) reply.header('connection', 'close')
      done(null, payload)
    })

    // Once the server is closed no request is going: the busy limit must not interrupt the database's work after
    // that (another app on the same database, as in the tests, or the close's own writes of the visits). Cleared
    // when the server closes, which is before the other plugins' onClose hooks run (the visits' writes among them):
    // an onClose hook of this plugin runs after theirs, and is there for an app that never listened.
    let busyLimit: NodeJS.Timeout | undefined
    app.server.on('close', () => clearTimeout(busyLimit))
    app.addHook('onClose', (_instance, done) => {
      clearTimeout(busyLimit)
      done()
    })
    app.decorate('closingSince', null)
    const closingListeners: (() => void)[] = []
    app.decorate('onClosing', (listener: () => void) => {
      closingListeners.push(listener)
    })
    app.addHook('preClose', async () => {
      closing = true
      const began = Date.now()
      app.closingSince = began
      for (const listener of closingListeners) listener()
      busyLimit = setTimeout(() => {
        options.interrupt?.()
        setTimeout(() => app.server.closeAllConnections(), INTERRUPTED_ANSWERS_MS).unref()
      }, busyLimitMs).unref()
      const quiet = (state: ConnectionState, now: number) =>
        state.requests === 0 && now - Math.max(state.quietSince, began) >= idleGraceMs
      /** Reads and answers until every connection is quiet or gone (not before `atLeastUntil`), or `until`. */
      const drain = async (until: number, atLeastUntil = 0) => {
        while (connections.size > 0 || Date.now() < atLeastUntil) {
          await afterNextReads()
          const now = Date.now()
          if (now >= until || (now >= atLeastUntil && [...connections.values()].every((state) => quiet(state, now)))) break
        }
      }
      // A listening server keeps accepting for the grace at least, even with no connection open: a load balancer
      // may go on sending new ones for a moment after the signal, and they get a 503 rather than a refusal.
      await drain(began + limitMs, app.server.listening ? began + idleGraceMs : 0)
      if (app.server.listening) {
        NetServer.prototype.close.call(app.server)
        await afterNextReads()
        await drain(Math.min(Date.now() + LAST_CONNECTIONS_MS, began + busyLimitMs))
      }
      const states = [...connections.values()]
      const busy = states.filter((state) => state.requests > 0).length
      app.log.info(
        { quiet: states.length - busy, busy, ms: Date.now() - began },
        'closing: connections drained; closing the quiet ones left and the server',
      )
      // Node would keep one whose request head is half sent until its headers timeout.
      for (const [socket, state] of connections) if (state.requests === 0) socket.destroy()
    })
  },
  { name: 'graceful-close' },
)
