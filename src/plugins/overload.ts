/**
 * Overload protection with @fastify/under-pressure: while this instance is saturated it answers 503
 * `unavailable` with Retry-After at once, instead of queueing requests until their clients time out, and
 * /readyz says so (src/health/health-routes.ts), so the load balancer sends traffic to other instances.
 *
 * - The event loop: under-pressure samples its delay (the mean over `sampleIntervalMs`); above
 *   OVERLOAD_EVENT_LOOP_DELAY_MS every request is refused, visits included.
 * - The database pool: a check every `poolCheckIntervalMs` reads the main pool's waiting queries (a few
 *   property reads, src/db/database.ts); above OVERLOAD_DB_POOL_WAITING the API is refused. Visitors are
 *   not: a warm link needs no database, and a cold one is read on the visitor pool of its own.
 * - Always answered: /healthz (liveness must not fail for load, or the orchestrator would restart a busy
 *   instance), /readyz (it reports the pressure) and /metrics (operators need it most then), through the
 *   per-route `pressureHandler` under-pressure looks for in a route's config.
 *
 * The refusal is a problem+json body returned from the pressure handler, which under-pressure sends (its
 * types say void, its code sends what a handler returns). It writes no log line per request (the request's
 * line is skipped for the replies in `refusedReplies`, src/app.ts): a warning at most once a minute says how
 * many were refused.
 */
import underPressure, { TYPE_HEALTH_CHECK } from '@fastify/under-pressure'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'
import { overloaded } from '../errors/app-error.js'
import type { OverloadCounts } from '../metrics/service-metrics.js'
import { PROBLEM_MEDIA_TYPE } from './openapi-responses.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

export type OverloadReason = keyof OverloadCounts['refused']

type MemoryUsage = typeof process.memoryUsage

/**
 * under-pressure reads the process's memory every sample (process.memoryUsage, which opens /proc/self/stat on
 * Linux): with every file descriptor taken (connections up to the open-file limit) that read threw EMFILE in its
 * timer, uncaught, and the process shut down. A reading that fails gives the last good one instead. Done once per
 * process, for every caller of process.memoryUsage (the metrics' too).
 */
function keepMemoryReadingsFromThrowing(): void {
  const read = process.memoryUsage as MemoryUsage & { keptFromThrowing?: true }
  if (read.keptFromThrowing) return
  let last = read()
  const reading = () => {
    try {
      return (last = read())
    } catch {
      return last
    }
  }
  const rss = () => {
    try {
      return read.rss()
    } catch {
      return last.rss
    }
  }
  process.memoryUsage = Object.assign(reading, { rss, keptFromThrowing: true as const })
}

export interface OverloadOptions {
  /** How often the event loop's delay is sampled, in ms (default 1000: its mean over a second). */
  sampleIntervalMs?: number
  /** How often the pool is checked, in ms (default 250). */
  poolCheckIntervalMs?: number
}

export interface Overload extends OverloadCounts {
  /** Why requests are refused now (the event loop first), or null. */
  reason(): OverloadReason | null
}

type PressureHandler = (request: FastifyRequest, reply: FastifyReply, type: string, value: number | undefined) => unknown

declare module 'fastify' {
  interface FastifyInstance {
    overload: Overload
  }
  interface FastifyContextConfig {
    /** under-pressure's handler for this route (undefined: the request goes on; a body: sent as the answer). */
    pressureHandler?: PressureHandler
  }
}

/** Route config of the routes answered whatever the pressure: the probes and /metrics. */
export const ALWAYS_ANSWERED = { pressureHandler: () => undefined }

/** Route config of the visitor routes: only a saturated event loop refuses them (see above). */
export const VISITOR_PRESSURE = {
  pressureHandler: ((request, reply, type, value) => decide(request, reply, type, value, false)) satisfies PressureHandler,
}

/** The API's (every route without a handler of its own): either pressure refuses it. */
const apiPressure: PressureHandler = (request, reply, type, value) => decide(request, reply, type, value, true)

const refusal = { event_loop: overloaded('event loop'), database_pool: overloaded('database pool') }

/**
 * What a request under pressure gets: undefined lets it through, a problem body is sent as the answer.
 * The event loop's delay is not judged until two sample intervals have passed since the app was ready: the
 * delay sampled before covers start-up (migrations, loading code, the embedded database), which blocks the
 * loop, and is not load. After that, an event-loop delay of Infinity (under-pressure's "no sample in the
 * interval": the loop was held for at least the whole interval) is over any limit no longer than the interval,
 * the default's case (ignored, as it once was, protection never engaged at the default settings). The pool is still
 * checked (under-pressure stops at the first check that fails).
 */
function decide(request: FastifyRequest, reply: FastifyReply, type: string, _value: number | undefined, poolRefuses: boolean) {
  const { active } = request.server.overload
  if (type !== TYPE_HEALTH_CHECK && active().event_loop) return refuse(request, reply, 'event_loop')
  if (poolRefuses && active().database_pool) return refuse(request, reply, 'database_pool')
  return undefined
}

const refusalWarning = new OccasionalWarning()

/** The answers refused for overload: the request log leaves them out (see above). */
export const refusedReplies = new WeakSet<FastifyReply>()

/** Counts the refusal (and logs at most once a minute) and returns the body under-pressure sends. */
function refuse(request: FastifyRequest, reply: FastifyReply, reason: OverloadReason) {
  request.server.overload.refused[reason]++
  refusedReplies.add(reply)
  const refused = refusalWarning.occurred()
  if (refused !== null) request.log.warn({ reason, refused }, 'overloaded: requests are refused with 503 until the pressure passes')
  const error = refusal[reason]
  reply.code(error.status).headers(error.headers).type(PROBLEM_MEDIA_TYPE)
  return error.toProblem()
}

export default fp(
  async function overload(app: FastifyInstance, options: { config: Config; overload?: OverloadOptions }) {
    const { eventLoopDelayMs, dbPoolWaiting } = options.config.overload
    const settings = options.overload ?? {}

    const sampleIntervalMs = settings.sampleIntervalMs ?? 1000
    let poolSaturated = false
    const mainPoolWaiting = () => app.db.pools().find((pool) => pool.name === 'main')?.waiting ?? 0
    let judgedFrom = Infinity
    app.addHook('onReady', async () => {
      judgedFrom = performance.now() + 2 * sampleIntervalMs
    })
    const eventLoopSaturated = () => {
      if (eventLoopDelayMs === 0 || performance.now() < judgedFrom) return false
      const delay = app.memoryUsage().eventLoopDelay
      // No sample in the interval: the loop was held for at least the interval, which is over a limit no longer.
      return delay === Infinity ? eventLoopDelayMs <= sampleIntervalMs : delay > eventLoopDelayMs
    }
    app.decorate('overload', {
      refused: { event_loop: 0, database_pool: 0 },
      active: () => ({ event_loop: eventLoopSaturated(), database_pool: poolSaturated }),
      reason: () => (eventLoopSaturated() ? 'event_loop' : poolSaturated ? 'database_pool' : null),
    } satisfies Overload)

    keepMemoryReadingsFromThrowing()
    await app.register(underPressure, {
      // 0 turns under-pressure's check off.
      maxEventLoopDelay: eventLoopDelayMs,
      sampleInterval: sampleIntervalMs,
      ...(dbPoolWaiting > 0
        ? {
            healthCheck: async () => {
              poolSaturated = mainPoolWaiting() > dbPoolWaiting
              return !poolSaturated
            },
            healthCheckInterval: settings.poolCheckIntervalMs ?? 250,
          }
        : {}),
      pressureHandler: apiPressure as never,
    })
  },
  { name: 'overload', dependencies: ['database'] },
)
