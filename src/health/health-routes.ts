import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'

const Status = Type.Object({ status: Type.String() })

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
        response: { 200: Status, 503: Status },
      },
    },
    async (_request, reply) =>
      (await app.db.ping()) ? { status: 'ready' } : reply.code(503).send({ status: 'database unreachable' }),
  )
}
