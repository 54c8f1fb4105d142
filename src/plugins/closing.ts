import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { shuttingDown } from '../errors/app-error.js'

/**
 * While the app closes (SIGTERM), a request that still arrives on an open connection is answered like any
 * other error: 503 problem+json with Retry-After, and Connection: close so the client reconnects (to another
 * instance, or to this one restarted). Fastify's own answer (return503OnClosing) is neither problem+json nor
 * says when to come back, so app.ts turns it off.
 */
export default fp(
  async function closing(app: FastifyInstance) {
    let closing = false
    app.addHook('preClose', async () => {
      closing = true
    })
    app.addHook('onRequest', async (_request, reply) => {
      if (!closing) return
      reply.header('connection', 'close')
      throw shuttingDown()
    })
  },
  { name: 'closing' },
)
