import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'
import { RETRY_AFTER_UNAVAILABLE_SECONDS } from '../errors/app-error.js'

const Status = Type.Object({ status: Type.String() })
const RetryAfter = { 'Retry-After': Type.Integer({ minimum: 1, description: 'Seconds to wait before asking again' }) }

export default async function healthRoutes(app: FastifyInstance) {
  app.get(
    '/healthz',
    { schema: { summary: 'Liveness: the process answers', tags: ['health'], response: { 200: Status } } },
    async () => ({ status: 'ok' }),
  )
  app.get(
    '/readyz',
    {
      schema: {
        summary: 'Readiness: the database answers',
        tags: ['health'],
        response: {
          200: Status,
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
