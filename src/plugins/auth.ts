import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { BadTokenThrottle, RedisFailureCount } from '../auth/bad-token-throttle.js'
import type { Config } from '../config/config.js'
import { clientAddress } from './client-address.js'
import { hashToken } from '../auth/tokens.js'
import { tooManyRequests, unauthorized } from '../errors/app-error.js'
import { CACHE_TTL_MS, tokensGeneration } from '../cache/change-notices.js'
import { TtlCache } from '../cache/ttl-cache.js'

export interface TokenCacheOptions {
  /** How long a live token's record is reused (default CACHE_TTL_MS: revocation applies within it everywhere). */
  ttlMs?: number
  /** The cache's clock (tests). */
  now?: () => number
}

/** Live tokens remembered per instance; unknown and revoked ones are read every time (and throttled). */
const TOKEN_CACHE_ENTRIES = 10_000

interface TokenRecord {
  id: number
  workspaceId: number
  official: boolean
  revokedAt: Date | null
}

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
    /** The bad-token throttle (its refusals are a metric). */
    badTokenThrottle: BadTokenThrottle
  }
}

export const TOKEN_HEADER = 'api-authorization'

export default fp(
  async function auth(app: FastifyInstance, options: { config: Config; throttle?: BadTokenThrottle; cache?: TokenCacheOptions }) {
    const shared = app.redis ? new RedisFailureCount(app.redis, app.log, options.config.redisKeyPrefix) : undefined
    const throttle = options.throttle ?? new BadTokenThrottle({ shared })
    // The token's record was one statement on every API request; it changes only when the token is revoked.
    const tokens = new TtlCache<string, TokenRecord | null>({
      ttlMs: options.cache?.ttlMs ?? CACHE_TTL_MS,
      maxEntries: TOKEN_CACHE_ENTRIES,
      now: options.cache?.now,
      generation: tokensGeneration,
    })
    const readToken = (hash: string) =>
      app.db.prisma.apiToken.findUnique({
        where: { hash },
        select: { id: true, workspaceId: true, official: true, revokedAt: true },
      })
    app.decorateRequest('caller', null as unknown as Caller)
    app.decorate('badTokenThrottle', throttle)

    app.decorate('authenticate', async function authenticate(request: FastifyRequest) {
      const address = clientAddress(request)
      const blockedFor = throttle.blockedFor(address)
      if (blockedFor > 0) {
        throttle.refusals++
        throw tooManyRequests('Too many requests with a bad API token; wait and try again', blockedFor)
      }

      const header = request.headers[TOKEN_HEADER]
      const token = typeof header === 'string' ? header.trim() : ''
      let record: TokenRecord | null = null
      if (token) {
        const hash = hashToken(token)
        record = await tokens.get(hash, () => readToken(hash), (found) => found !== null && !found.revokedAt)
      }
      if (!record || record.revokedAt) {
        const nowBlockedFor = await throttle.recordFailure(address)
        if (nowBlockedFor > 0) {
          throttle.refusals++
          throw tooManyRequests('Too many requests with a bad API token; wait and try again', nowBlockedFor)
        }
        throw unauthorized()
      }
      request.caller = { tokenId: record.id, workspaceId: record.workspaceId, official: record.official }
    })
  },
  { name: 'auth', dependencies: ['database', 'redis'] },
)
