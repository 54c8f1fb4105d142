/**
 * `app.autofill`: open-graph autofill (contract section 12) with its guarded dispatcher and its cache,
 * configured from AUTOFILL_TIMEOUT_MS, AUTOFILL_MAX_BYTES and AUTOFILL_ALLOW_PRIVATE.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'
import { allowEveryAddress, isPublicAddress, type AddressPolicy } from '../autofill/address-policy.js'
import { Autofill } from '../autofill/autofill.js'
import { createGuardedAgent, type LookupFunction } from '../autofill/guarded-agent.js'
import { MemoryMetadataCache, RedisMetadataCache, type MetadataCache } from '../autofill/metadata-cache.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

/**
 * Once the instance is closing, the most a page fetch under way may still take: the close waits 6 s for the
 * requests under way (src/plugins/graceful-close.ts), which leaves a create whose fetch is cut the time to store its
 * link (as sent) and answer, whatever AUTOFILL_TIMEOUT_MS says.
 */
const FETCH_WHILE_CLOSING_MS = 3000

export const AUTOFILL_USER_AGENT = 'Mozilla/5.0 (compatible; shortlinks-autofill/0.1; +link preview of a short-link service)'

export interface AutofillPluginOptions {
  /** Host name resolution (tests inject one); default dns.lookup. */
  lookup?: LookupFunction
  /** A further restriction on top of the configured policy (the test suite allows loopback at most). */
  restrictAddress?: AddressPolicy
  cache?: MetadataCache
  /** Put after REDIS_KEY_PREFIX before the Redis cache keys (tests use one per app). */
  keyPrefix?: string
}

declare module 'fastify' {
  interface FastifyInstance {
    autofill: Autofill
  }
}

export default fp(
  async function autofillPlugin(app: FastifyInstance, options: { config: Config; autofill?: AutofillPluginOptions }) {
    const { timeoutMs, maxBytes, allowPrivate } = options.config.autofill
    const settings = options.autofill ?? {}
    const policy = allowPrivate ? allowEveryAddress : isPublicAddress
    const restrict = settings.restrictAddress
    const allowAddress: AddressPolicy = restrict ? (address) => policy(address) && restrict(address) : policy
    if (allowPrivate) app.log.warn('AUTOFILL_ALLOW_PRIVATE=true: autofill may reach loopback and private addresses (tests only)')

    const dispatcher = createGuardedAgent({ allowAddress, lookup: settings.lookup, connectTimeoutMs: timeoutMs })
    const stopFetching = new AbortController()
    let stopTimer: NodeJS.Timeout | undefined
    app.onClosing(() => {
      stopTimer = setTimeout(() => stopFetching.abort(), FETCH_WHILE_CLOSING_MS).unref()
    })
    app.addHook('onClose', async () => {
      clearTimeout(stopTimer)
      stopFetching.abort()
      await dispatcher.destroy()
    })

    const cache =
      settings.cache ?? (app.redis ? new RedisMetadataCache(app.redis, { keyPrefix: options.config.redisKeyPrefix + (settings.keyPrefix ?? '') }) : new MemoryMetadataCache())
    const cacheWarning = new OccasionalWarning()
    const autofill = new Autofill({
      dispatcher,
      stop: stopFetching.signal,
      timeoutMs,
      maxBytes,
      userAgent: AUTOFILL_USER_AGENT,
      cache,
      onCacheError: (error) => {
        // With Redis down, every autofill meets it.
        if (cacheWarning.occurred() === null) return
        app.log.warn({ err: error }, 'autofill cache unreachable: pages are fetched without it')
      },
    })
    app.decorate('autofill', autofill)
  },
  { name: 'autofill', dependencies: ['redis', 'graceful-close'] },
)
