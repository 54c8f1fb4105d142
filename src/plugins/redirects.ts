/**
 * `app.redirects`: what the visitor side of the service keeps per instance (the short domains, the cache of
 * redirect views and how changes reach it, the password cookies and tries, counters), and `app.visits`, the
 * seam where a visit that reached its destination is handed on. The routes are in src/redirects/redirect-routes.ts.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'
import { slugKey } from '../links/slug.js'
import type { LinkLocator } from '../links/link-service.js'
import { BLIND_MAX_AGE_MS, localChannel, RedisChangeChannel, type Change, type ChangeChannel } from '../redirects/invalidation.js'
import { PasswordCookies } from '../redirects/password-cookie.js'
import { PasswordChecks } from '../redirects/password-checks.js'
import { MemoryPasswordThrottle, RedisPasswordThrottle, type PasswordThrottle } from '../redirects/password-throttle.js'
import { cacheKey, RedirectCache, type RedirectCacheOptions } from '../redirects/redirect-cache.js'
import { batchedViewReader, loadRedirectViews, type RedirectView } from '../redirects/redirect-view.js'
import { ShortDomains } from '../redirects/short-domains.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'
import type { VisitRecorder } from '../redirects/visits.js'

export interface RedirectPluginOptions {
  /** The clock of expiry, cookies and password tries, in ms (tests drive it). */
  now?: () => number
  /** The rotator's draw, in [0, 1) (tests seed it). */
  random?: () => number
  cache?: RedirectCacheOptions
  /** Put after REDIS_KEY_PREFIX before Redis keys and the change channel (tests use one per run). */
  keyPrefix?: string
  /** Another visit recorder than the database one (tests); see src/plugins/visits.ts. */
  visits?: VisitRecorder
  domainsRefreshMs?: number
  /** How many password checks run and wait at most (tests make it small). */
  passwordChecks?: { maxRunning: number; maxWaiting: number }
}

/** How many visits got each answer, since start (a later issue exports metrics). */
export interface VisitCounters {
  redirect: number
  masking: number
  interstitial: number
  crawler: number
  password: number
  wrongPassword: number
  throttled: number
  /** Password tries answered 503: too many checks under way (src/redirects/password-checks.ts). */
  checksBusy: number
  expired: number
  gone: number
  notFound: number
}

export interface Redirects {
  readonly domains: ShortDomains
  readonly cache: RedirectCache
  readonly channel: ChangeChannel
  readonly throttle: PasswordThrottle
  readonly passwordChecks: PasswordChecks
  readonly cookies: PasswordCookies
  readonly counters: VisitCounters
  /** Statements sent to read views (each reads one or more links: cache.reads counts the links). */
  readonly viewStatements: () => number
  readonly now: () => number
  readonly random: () => number
  /** The view of a link (null: no such link), from the cache at once, else read from the database and kept. */
  lookup(host: string, slug: string): RedirectView | null | Promise<RedirectView | null>
  /** Links were created, updated or deleted: every instance forgets what it had of them (one message for all). */
  linksChanged(links: { domain: string; slug: string }[]): void
  /**
   * A write of these links failed once it may have reached the database: it may have been stored all the same (its
   * answer lost with the connection). Every instance forgets them at once, and again FORGET_AGAIN_AFTER_MS later,
   * for a statement given up on here that commits later still.
   */
  linksUncertain(links: LinkLocator[]): void
  /** Something all links of a workspace may show changed (a pixel, a script). */
  workspaceChanged(workspaceId: number): void
  /** Such a write failed once it may have reached the database: as linksUncertain, for the workspace's links. */
  workspaceUncertain(workspaceId: number): void
}

/**
 * How long a link read before keeps answering its visits while the database cannot be read (an outage), as long as
 * this instance hears changes (the channel is live). Bounded: a change made by an instance that could not reach
 * Redis at the time is heard by no other, which otherwise read the link again within its lifetime (60 s).
 */
export const LAST_KNOWN_FOR_MS = 15 * 60_000

/** When the links of a failed write are forgotten a second time (linksUncertain). */
export const FORGET_AGAIN_AFTER_MS = 5000

declare module 'fastify' {
  interface FastifyInstance {
    redirects: Redirects
  }
}

export default fp(
  async function redirects(app: FastifyInstance, options: { config: Config; redirects?: RedirectPluginOptions }) {
    const { config } = options
    const settings = options.redirects ?? {}
    const prisma = app.db.prisma
    const now = settings.now ?? Date.now
    const domains = new ShortDomains(prisma, config.reservedDomains, app.log, settings.domainsRefreshMs)
    let viewStatements = 0
    const readViews = batchedViewReader((keys) => {
      viewStatements++
      return loadRedirectViews(app.db, keys)
    })
    const cache = new RedirectCache(readViews, settings.cache)
    const apply = (change: Change) => {
      if (change.keys) cache.invalidate(change.keys)
      if (change.links) cache.invalidateLinks(change.links)
      if (change.workspaceId !== undefined) cache.invalidateWorkspace(change.workspaceId)
    }
    const keyPrefix = options.config.redisKeyPrefix + (settings.keyPrefix ?? '')
    const channel: ChangeChannel = app.redis
      ? new RedisChangeChannel(app.redis, `${keyPrefix}redirects:changes`, { apply, resync: () => cache.clear() }, app.log)
      : localChannel
    const throttle: PasswordThrottle = app.redis ? new RedisPasswordThrottle(app.redis, app.log, keyPrefix) : new MemoryPasswordThrottle()
    if (!config.cookieSecret) {
      app.log.warn(
        'redirects: COOKIE_SECRET is unset, so password cookies are signed with a key of this process: they end ' +
          'with it, and several instances need COOKIE_SECRET set (the same on each) to accept each other\'s',
      )
    }

    const counters: VisitCounters = {
      redirect: 0, masking: 0, interstitial: 0, crawler: 0, password: 0, wrongPassword: 0, throttled: 0, checksBusy: 0, expired: 0, gone: 0,
      notFound: 0,
    }
    const lastKnownWarning = new OccasionalWarning()
    /** A link the database could not give: its last known view, if this instance heard every change since. */
    const lastKnown = (key: string, error: unknown): RedirectView => {
      const view = channel.live ? cache.lastKnown(key, LAST_KNOWN_FOR_MS) : undefined
      if (view === undefined) throw error
      const served = lastKnownWarning.occurred()
      if (served !== null) {
        app.log.warn({ err: error, served }, 'redirects: the database cannot be read; links read within the last 15 minutes are served as last known')
      }
      return view
    }
    const publish = (change: Change) => {
      apply(change)
      channel.publish(change)
    }
    /** After a write that may yet commit (a statement given up on here): forgotten now and once more later. */
    const publishTwice = (change: Change) => {
      publish(change)
      setTimeout(() => publish(change), FORGET_AGAIN_AFTER_MS).unref()
    }

    app.decorate('redirects', {
      domains,
      cache,
      channel,
      throttle,
      passwordChecks: new PasswordChecks(settings.passwordChecks?.maxRunning, settings.passwordChecks?.maxWaiting),
      cookies: new PasswordCookies(config.cookieSecret, now),
      counters,
      viewStatements: () => viewStatements,
      now,
      random: settings.random ?? Math.random,
      lookup(host: string, slug: string) {
        const key = slugKey(slug)
        const inCache = cacheKey(host, key)
        // While changes may go unheard, nothing older than a second is trusted.
        const view = cache.peek(inCache, channel.live ? undefined : BLIND_MAX_AGE_MS)
        return view !== undefined ? view : cache.load(host, key).catch((error: unknown) => lastKnown(inCache, error))
      },
      linksChanged: (links) => publish({ keys: links.map((link) => cacheKey(link.domain, slugKey(link.slug))) }),
      linksUncertain: (links) => {
        const keys = links.flatMap((link) => ('slug' in link ? [cacheKey(link.domain, slugKey(link.slug))] : []))
        const uniqs = links.flatMap((link) => ('uniq' in link ? [link.uniq] : []))
        publishTwice({ ...(keys.length ? { keys } : {}), ...(uniqs.length ? { links: uniqs } : {}) })
      },
      workspaceChanged: (workspaceId) => publish({ workspaceId }),
      workspaceUncertain: (workspaceId) => publishTwice({ workspaceId }),
    } satisfies Redirects)

    app.addHook('onReady', () => domains.start())
    app.addHook('onClose', () => {
      domains.stop()
      return channel.close()
    })
  },
  { name: 'redirects', dependencies: ['database', 'redis', 'visits'] },
)
