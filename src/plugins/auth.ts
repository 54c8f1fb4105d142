import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { BadTokenThrottle } from '../auth/bad-token-throttle.js'
import { hashToken } from '../auth/tokens.js'
import { tooManyRequests, unauthorized } from '../errors/app-error.js'

export interface Caller {
  tokenId: number
  workspaceId: number
  /** An official integration: may use the reserved domains. */
  official: boolean
}

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller
  }
  interface FastifyInstance {
    /** onRequest hook for routes that need an API token: sets request.caller or answers 401/429. */
    authenticate: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  }
}

export const TOKEN_HEADER = 'api-authorization'

export default fp(
  async function auth(app: FastifyInstance, options: { throttle?: BadTokenThrottle }) {
    const throttle = options.throttle ?? new BadTokenThrottle()
    app.decorateRequest('caller', null as unknown as Caller)

    app.decorate('authenticate', async function authenticate(request: FastifyRequest) {
      const blockedFor = throttle.blockedFor(request.ip)
      if (blockedFor > 0) throw tooManyRequests('Too many requests with a bad API token; wait and try again', blockedFor)

      const header = request.headers[TOKEN_HEADER]
      const token = typeof header === 'string' ? header.trim() : ''
      const record = token
        ? await app.db.prisma.apiToken.findUnique({
            where: { hash: hashToken(token) },
            select: { id: true, workspaceId: true, official: true, revokedAt: true },
          })
        : null
      if (!record || record.revokedAt) {
        const nowBlockedFor = throttle.recordFailure(request.ip)
        if (nowBlockedFor > 0) {
          throw tooManyRequests('Too many requests with a bad API token; wait and try again', nowBlockedFor)
        }
        throw unauthorized()
      }
      request.caller = { tokenId: record.id, workspaceId: record.workspaceId, official: record.official }
    })
  },
  { name: 'auth', dependencies: ['database'] },
)
