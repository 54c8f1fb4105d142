import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'
import { RETRY_AFTER_UNAVAILABLE_SECONDS } from '../errors/app-error.js'
import { headersTooLarge } from '../errors/http-errors.js'
import { problemResponsesWith } from '../plugins/openapi-entity-responses.js'

const Status = Type.Object({ status: Type.String() })
const RetryAfter = { 'Retry-After': Type.Integer({ minimum: 1, description: 'Seconds to wait before asking again' }) }

/**
 * What a probe can get besides its answer: the HTTP layer's refusal of a request it cannot read (any route
 * can get it; on these routes it is the only client error, and a document needs one per operation).
 */
const probeErrors = problemResponsesWith({
  431: {
    description: 'headers_too_large: the request line and headers are too large; the connection is closed',
    examples: [headersTooLarge()],
  },
})

/** Public: probes carry no token (`security: []` overrides the document's global requirement). */
const common = { tags: ['health'], security: [] }

export default async function healthRoutes(app: FastifyInstance) {
  app.get(
    '/healthz',
    {
      schema: {
        ...common,
        operationId: 'getHealth',
        summary: 'Liveness: the process answers',
        description: 'Answers 200 as long as the process can serve requests; it checks nothing else. No token needed.',
        response: { 200: { description: 'The process is alive', content: { 'application/json': { schema: Status } } }, ...probeErrors },
      },
    },
    async () => ({ status: 'ok' }),
  )
  app.get(
    '/readyz',
    {
      schema: {
        ...common,
        operationId: 'getReadiness',
        summary: 'Readiness: the database answers',
        description:
          'Answers 200 when the database answers a ping, else 503 with Retry-After: take the instance out of the ' +
          'load balancer until it is ready again. No token needed.',
        response: {
          200: { description: 'The database answers', content: { 'application/json': { schema: Status } } },
          ...probeErrors,
          503: { description: 'The database does not answer', headers: RetryAfter, content: { 'application/json': { schema: Status } } },
        },
      },
    },
    async (_request, reply) =>
      (await app.db.ping())
        ? { status: 'ready' }
        : reply.code(503).header('retry-after', RETRY_AFTER_UNAVAILABLE_SECONDS).send({ status: 'database unreachable' }),
  )
}
