import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'
import { RETRY_AFTER_UNAVAILABLE_SECONDS } from '../errors/app-error.js'
import { ALWAYS_ANSWERED, type OverloadReason } from '../plugins/overload.js'
import { quietChildLogger } from '../plugins/quiet-logger.js'

const Status = Type.Object({ status: Type.String() })

/** What /readyz says while the instance refuses requests for load (src/plugins/overload.ts). */
const OVERLOAD_STATUS: Record<OverloadReason, string> = {
  event_loop: 'overloaded: event loop saturated',
  database_pool: 'overloaded: database pool saturated',
}
const RetryAfter = { 'Retry-After': Type.Integer({ minimum: 1, description: 'Seconds to wait before asking again' }) }

/**
 * Public: probes carry no token (`security: []` overrides the document's global requirement). Never refused
 * for load: liveness must not fail because the instance is busy, and readiness reports the load itself.
 */
const common = { tags: ['health'], security: [] }

/**
 * A load balancer or an orchestrator probes every instance every few seconds: at `info` their lines would be most
 * of the log and say nothing, and writing them was a third of a probe's cost (npm run bench, /healthz: 32-43 µs of
 * CPU a probe with the line, 22-25 without). Errors and warnings are still logged; the probes are counted in /metrics.
 */
const probeRoute = { config: ALWAYS_ANSWERED, logLevel: 'warn' } as const

export default async function healthRoutes(app: FastifyInstance) {
  // In this plugin's scope only: the probes' request logger, made only should they log (a warning).
  app.setChildLoggerFactory(quietChildLogger)
  app.get(
    '/healthz',
    {
      ...probeRoute,
      schema: {
        ...common,
        operationId: 'getHealth',
        summary: 'Liveness: the process answers',
        description: 'Answers 200 as long as the process can serve requests; it checks nothing else. No token needed.',
        response: { 200: { description: 'The process is alive', content: { 'application/json': { schema: Status } } } },
      },
    },
    async () => ({ status: 'ok' }),
  )
  app.get(
    '/readyz',
    {
      ...probeRoute,
      schema: {
        ...common,
        operationId: 'getReadiness',
        summary: 'Readiness: not overloaded, and the database answers',
        description:
          'Answers 200 when the instance is not overloaded and the database answers a ping, else 503 with Retry-After ' +
          'and a status saying why: take the instance out of the load balancer until it is ready again. Overloaded ' +
          "means the event loop's mean delay is over OVERLOAD_EVENT_LOOP_DELAY_MS (1 s by default) or more queries " +
          'than OVERLOAD_DB_POOL_WAITING (100) wait for a database connection; meanwhile the instance answers other ' +
          'requests 503 `unavailable` at once. No token needed.',
        response: {
          200: { description: 'Ready', content: { 'application/json': { schema: Status, example: { status: 'ready' } } } },
          503: {
            description:
              'Not ready: `database unreachable`, `overloaded: event loop saturated` or `overloaded: database pool saturated`',
            headers: RetryAfter,
            content: { 'application/json': { schema: Status, example: { status: 'overloaded: event loop saturated' } } },
          },
        },
      },
    },
    async (_request, reply) => {
      const overloaded = app.overload.reason()
      // Checked first: a saturated pool would make the ping itself wait.
      const status = overloaded ? OVERLOAD_STATUS[overloaded] : (await app.db.ping()) ? null : 'database unreachable'
      if (status === null) return { status: 'ready' }
      return reply.code(503).header('retry-after', RETRY_AFTER_UNAVAILABLE_SECONDS).send({ status })
    },
  )
}
