/**
 * Per-workspace quotas on create and update (contract section 8), reserve-then-refund:
 *
 * - one atomic store call checks the hour and the day window and takes a slot in both, or refuses taking
 *   nothing; the handler makes it with `app.quotas.admit(request)` once the request has passed every check it
 *   can make before writing (the schema, the link found, its domain, folder and fields), right before it
 *   changes anything (429 there, nothing stored), and before any outbound autofill fetch, so a client over
 *   its quota cannot make the service fetch pages. A request that fails those checks (a 400, 403, 404 or a
 *   409 known in advance) never holds a slot, so it cannot crowd out a valid request sent beside it: the slots
 *   counted are those of requests about to write, and a 429's Retry-After (when the oldest counted request
 *   stops counting) is what the client will find. (Reserved earlier, as the body passed the schema, so that
 *   the round trip overlapped the handler's reads, a burst of 404s refused valid updates beside them for an
 *   hour.)
 * - onSend: a request that ends in an error (a bad body, 403, 404, 409, 5xx) gives its slot back, so only
 *   successes consume quota; then the quota headers are set, on every answer of the route that has a
 *   workspace (401s have none).
 *
 * @fastify/rate-limit is not used: its store contract (`incr`) counts every request and has no way to
 * give a slot back, and a route gets one window; see the issue note.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'
import { quotaExceeded, unavailable } from '../errors/app-error.js'
import { MemoryQuotaStore } from '../rate-limits/memory-store.js'
import { afterRefund, exhaustedWindow, policyHeader, quotaHeaders } from '../rate-limits/quota-headers.js'
import { LateReservation, type QuotaDecision, type QuotaLimits, type QuotaOperation, type QuotaStore, type QuotaSubject, type QuotaTaken } from '../rate-limits/quota-store.js'
import { RedisQuotaStore } from '../rate-limits/redis-store.js'
import { firstConnection, writeAgainLater } from '../redis/redis-client.js'
import { workspaceLimits } from '../workspaces/workspace-repository.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

export interface RateLimitOptions {
  /** false: no limits at all (benchmarks). */
  enabled?: boolean
  /** A store of the caller's; otherwise Redis when REDIS_URL is set, else the in-process store. */
  store?: QuotaStore
  /** The clock of the windows, in ms (tests drive it). */
  now?: () => number
  /** Put after REDIS_KEY_PREFIX before every Redis key (tests use one per run). */
  keyPrefix?: string
  /** How long a workspace's quotas are reused before they are read again (default LIMITS_CACHE_MS). */
  limitsCacheMs?: number
}

/**
 * A workspace's quotas are read from the database at most this often per instance: the read measured
 * about 0.8 ms (median, PostgreSQL on the development machine), more than the limiter's whole budget of
 * 0.5 ms. limits:set therefore applies within 2 s, without a restart.
 */
export const LIMITS_CACHE_MS = 2000
const LIMITS_CACHE_ENTRIES = 10_000

type PayloadHook = (request: FastifyRequest, reply: FastifyReply, payload: unknown) => Promise<unknown>
type RequestHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>

export interface Quotas {
  /** 'redis', 'memory', 'custom' or 'off'. */
  readonly storeKind: string
  /** Requests (or bulk items) refused by a quota (429), and store calls that failed (Redis down): metrics. */
  readonly counts: QuotaCounts
  /** The hooks a limited route adds: spread them into its options. */
  routeHooks(operation: QuotaOperation): { preHandler?: RequestHook; onSend?: PayloadHook }
  /**
   * Waits for the request's reservation and applies it: throws 429 (or 503 under
   * RATE_LIMIT_ON_REDIS_ERROR=deny) when it was refused. A limited route's handler calls it before it
   * stores anything; every success path must pass through it.
   */
  admit(request: FastifyRequest): Promise<void>
  /**
   * Bulk create: up to `count` slots, each one atomic reservation as a single create takes, sent together (in
   * order, so the first `granted` are the ones that fit); `refused` is the error for the rest (429, or 503 under
   * RATE_LIMIT_ON_REDIS_ERROR=deny). `settle(used)` gives back every slot beyond the `used` ones that produced a
   * link and leaves the quota headers to the route's onSend hook.
   */
  reserveMany(request: FastifyRequest, operation: QuotaOperation, count: number): Promise<BulkReservation>
  /**
   * The request succeeds without storing anything (an Idempotency-Key's replay of a link an earlier attempt
   * stored): its reserved slot is given back when it is answered, as a failed request's is (contract section 8).
   */
  release(request: FastifyRequest): void
  /**
   * The request failed, but what it stored may be there (a 503 whose write's outcome is unknown): its slot stays
   * taken, as a stored link's does. A retry with its Idempotency-Key answers that link and takes no slot.
   */
  keep(request: FastifyRequest): void
}

export interface QuotaCounts {
  rejected: Record<QuotaOperation, number>
  storeFailures: number
}

export interface BulkReservation {
  granted: number
  refused?: Error
  /** `used`: how many of the granted slots produced a link (the rest are given back). */
  settle(used: number): Promise<void>
}

/**
 * Where a request stands with the quota: what it reserved, or why nothing is known. `late`: the store did not
 * answer in time but may still take the slot (LateReservation).
 */
type QuotaState = { decision: QuotaDecision } | { storeFailed: true; late?: LateReservation } | { lookupFailed: unknown }

declare module 'fastify' {
  interface FastifyInstance {
    quotas: Quotas
  }
  interface FastifyRequest {
    /** The limited operation of the route. */
    quotaOperation: QuotaOperation | null
    /** The reservation on its way (sent by admit()): an answer sent while it is under way still settles it. */
    quotaPending: Promise<QuotaState> | null
    /** The reservation, once admit() has applied it. */
    quotaState: QuotaState | null
    /** Set by quotas.release(): the request stored nothing after all, and its slot goes back as a failure's. */
    quotaReleased: boolean
    /** Set by quotas.keep(): the request failed, but may have stored its link; its slot stays taken. */
    quotaKept: boolean
    /** Tells the requests waiting on this one's slot (admit) that it is settled: kept or given back. */
    quotaSettled: (() => void) | null
  }
}

/** How long a refused request waits for this instance's unsettled reservations before it is answered 429. */
const UNSETTLED_WAIT_MS = 1000

/** A refund the store failed is tried again this often, for this long. */
const REFUND_RETRY_MS = 1000
const REFUND_RETRY_FOR_MS = 30_000

export default fp(
  async function rateLimits(app: FastifyInstance, options: { config: Config; rateLimits?: RateLimitOptions }) {
    const { config } = options
    const settings = options.rateLimits ?? {}
    const policy = config.rateLimitOnRedisError
    const counts: QuotaCounts = { rejected: { create: 0, update: 0 }, storeFailures: 0 }
    if (settings.enabled === false) {
      app.decorate('quotas', {
        storeKind: 'off',
        counts,
        routeHooks: () => ({}),
        admit: async () => {},
        reserveMany: async (_request: FastifyRequest, _operation: QuotaOperation, count: number) => ({ granted: count, settle: async () => {} }),
        release: () => {},
        keep: () => {},
      })
      return
    }

    let store: QuotaStore
    let storeKind: string
    if (settings.store) {
      store = settings.store
      storeKind = 'custom'
    } else if (app.redis) {
      store = new RedisQuotaStore(app.redis, { keyPrefix: config.redisKeyPrefix + (settings.keyPrefix ?? ''), callersClock: settings.now !== undefined })
      storeKind = 'redis'
      if (!(await firstConnection(app.redis))) {
        app.log.warn(`rate limits: Redis is not reachable yet; until it is, RATE_LIMIT_ON_REDIS_ERROR=${policy} applies`)
      }
    } else {
      store = new MemoryQuotaStore()
      storeKind = 'memory'
    }
    app.addHook('onClose', async () => store.close())
    const now = settings.now ?? Date.now
    const prisma = app.db.prisma

    const cacheMs = settings.limitsCacheMs ?? LIMITS_CACHE_MS
    const limitsCache = new Map<number, { limits: QuotaLimits; readAt: number }>()
    async function limitsOf(workspaceId: number): Promise<QuotaLimits> {
      const time = now()
      const cached = limitsCache.get(workspaceId)
      // (A clock that went back, in tests, reads again too.)
      if (cached && time >= cached.readAt && time - cached.readAt < cacheMs) return cached.limits
      const limits = await workspaceLimits(prisma, workspaceId)
      limitsCache.delete(workspaceId)
      if (limitsCache.size >= LIMITS_CACHE_ENTRIES) limitsCache.delete(limitsCache.keys().next().value!)
      limitsCache.set(workspaceId, { limits, readAt: time })
      return limits
    }

    // While the store is unreachable, a warning a minute at most, with how many requests met it.
    let failing = false
    const outageWarning = new OccasionalWarning()
    function storeFailed(request: FastifyRequest, error: unknown): void {
      counts.storeFailures++
      failing = true
      const requests = outageWarning.occurred()
      if (requests !== null) {
        request.log.warn(
          { err: error, requests, policy },
          policy === 'allow'
            ? 'rate-limit store unreachable: requests go through unlimited (RATE_LIMIT_ON_REDIS_ERROR=allow)'
            : 'rate-limit store unreachable: requests are refused with 503 (RATE_LIMIT_ON_REDIS_ERROR=deny)',
        )
      }
    }
    function storeAnswered(request: FastifyRequest): void {
      if (!failing) return
      failing = false
      outageWarning.reset()
      request.log.info('rate-limit store reachable again: quotas apply')
    }

    app.decorateRequest('quotaOperation', null)
    app.decorateRequest('quotaPending', null)
    app.decorateRequest('quotaState', null)
    app.decorateRequest('quotaReleased', false)
    app.decorateRequest('quotaKept', false)
    app.decorateRequest('quotaSettled', null)

    const subjectOf = (request: FastifyRequest): QuotaSubject => ({
      workspaceId: request.caller.workspaceId,
      operation: request.quotaOperation!,
    })

    /** Asks the store; never rejects (a database error is handed to admit() to throw). */
    async function reserve(request: FastifyRequest): Promise<QuotaState> {
      let limits: QuotaLimits
      try {
        limits = await limitsOf(request.caller.workspaceId)
      } catch (error) {
        return { lookupFailed: error }
      }
      try {
        const decision = await store.reserve(subjectOf(request), limits, now())
        storeAnswered(request)
        return { decision }
      } catch (error) {
        storeFailed(request, error)
        return { storeFailed: true, late: error instanceof LateReservation ? error : undefined }
      }
    }

    /**
     * Gives a slot back whatever the store's state: a request that did not succeed consumes no quota (contract
     * section 8), even when Redis was away as it ended.
     */
    function refundEventually(taken: QuotaTaken): void {
      store.refund(taken).catch((error: unknown) => refundAgainLater(taken, error))
    }

    /**
     * A refund that failed is tried again every second for a while. A refund names the requests it gives back,
     * so one that was sent and ran (its answer lost with its connection) is harmless to send again.
     */
    function refundAgainLater(taken: QuotaTaken, error: unknown): void {
      writeAgainLater(() => store.refund(taken), error, {
        everyMs: REFUND_RETRY_MS,
        forMs: REFUND_RETRY_FOR_MS,
        // A reservation Redis runs on waking from a long freeze is refunded once it answers again, however late.
        ready: app.redis ? () => app.redis!.status === 'ready' : undefined,
        giveUp: (failure) => app.log.warn({ err: failure }, 'rate limits: a slot of a request that did not succeed could not be given back'),
      })
    }

    /** A reservation the store made after its request stopped waiting: what the request did not use goes back. */
    function giveBackLate(reservation: LateReservation, used: number): void {
      const giveBack = ({ subject, ids }: QuotaTaken) => {
        if (ids.length > used) refundEventually({ subject, ids: ids.slice(used) })
      }
      reservation.late.then(
        ({ decision }) => decision.taken && giveBack(decision.taken),
        // Failed with its connection (closed on its socket timeout while Redis was frozen): Redis may still run the
        // script it had received. Every slot it may have taken goes back (a refund of one it did not take is a no-op).
        () => giveBack(reservation.possible),
      )
    }

    /**
     * The reservations of this instance's requests still under way, by subject. A request that fails late (a slug
     * taken in the same instant, an update in one statement of a link it may not change) holds its slot until it
     * is answered; a request refused meanwhile waits for them (UNSETTLED_WAIT_MS at most) and asks once more, rather
     * than being told to come back in an hour while the slot is about to be given back. (Other instances' are not
     * known here.)
     */
    const unsettled = new Map<string, Set<Promise<void>>>()
    const unsettledKey = (subject: QuotaSubject) => `${subject.workspaceId}:${subject.operation}`

    function holdUntilSettled(request: FastifyRequest): void {
      const key = unsettledKey(subjectOf(request))
      let pending = unsettled.get(key)
      if (!pending) unsettled.set(key, (pending = new Set()))
      const held = pending
      const settled = new Promise<void>((resolve) => {
        request.quotaSettled = () => {
          request.quotaSettled = null
          held.delete(settled)
          if (held.size === 0 && unsettled.get(key) === held) unsettled.delete(key)
          resolve()
        }
      })
      held.add(settled)
    }

    /**
     * Waits, until `deadline` at most, for this instance's reservations of the subject that are unsettled now; true
     * if there were some (and time is left to ask again).
     */
    async function othersSettled(request: FastifyRequest, deadline: number): Promise<boolean> {
      const pending = unsettled.get(unsettledKey(subjectOf(request)))
      const left = deadline - performance.now()
      if (!pending || pending.size === 0 || left <= 0) return false
      let timer: NodeJS.Timeout | undefined
      await Promise.race([Promise.all(pending), new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))])
      clearTimeout(timer)
      return performance.now() < deadline
    }

    async function admit(request: FastifyRequest): Promise<void> {
      if (!request.quotaOperation) throw new Error('quotas.admit() called on a route without quota hooks')
      let state = request.quotaState ?? (await (request.quotaPending ??= reserve(request)))
      const deadline = performance.now() + UNSETTLED_WAIT_MS
      while ('decision' in state && !state.decision.allowed && (await othersSettled(request, deadline))) {
        state = await (request.quotaPending = reserve(request))
      }
      request.quotaState = state
      if ('decision' in state && state.decision.taken && !request.quotaSettled) holdUntilSettled(request)
      if ('lookupFailed' in state) throw state.lookupFailed
      if ('storeFailed' in state) {
        if (policy === 'deny') throw unavailable('rate-limit store')
        return
      }
      if (!state.decision.allowed) {
        // Counted once the 429 is sent (settleQuota): a create of a taken slug answers its 409 instead.
        const full = exhaustedWindow(state.decision)
        throw quotaExceeded(request.quotaOperation, full, full.resetSeconds)
      }
    }

    /** Where the quota stands for an answer given before any reservation (a 400 of the schema, a 413, a 415). */
    async function peekQuota(request: FastifyRequest): Promise<QuotaDecision | undefined> {
      const limits = await limitsOf(request.caller.workspaceId)
      try {
        const decision = await store.peek(subjectOf(request), limits, now())
        storeAnswered(request)
        return decision
      } catch (error) {
        storeFailed(request, error)
        return undefined
      }
    }

    /** The counters could not be read: where the quota stands is unknown, but not what it is. */
    async function sendPolicyOnly(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      reply.header('ratelimit-policy', policyHeader(await limitsOf(request.caller.workspaceId)))
    }

    /** onSend: a failed request gives its slot back; then the quota headers. */
    async function settleQuota(request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
      if (!request.caller) return payload
      try {
        return await settleAndSetHeaders(request, reply, payload)
      } finally {
        request.quotaSettled?.()
      }
    }

    async function settleAndSetHeaders(request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
      try {
        const state = request.quotaState ?? (request.quotaPending ? await request.quotaPending : undefined)
        // Only a request that stored something (or may have) keeps its slot.
        const consumed = (reply.statusCode < 400 || request.quotaKept) && !request.quotaReleased
        if (state && 'storeFailed' in state && state.late) {
          // Let through unlimited (allow) and succeeded: the slot is its own. Refused (deny) or failed: not.
          giveBackLate(state.late, policy === 'allow' && consumed ? 1 : 0)
        }
        if (state && 'storeFailed' in state) {
          await sendPolicyOnly(request, reply)
          return payload
        }
        if (state && !('decision' in state)) return payload
        if (reply.statusCode === 429 && state && !state.decision.allowed && request.quotaOperation) counts.rejected[request.quotaOperation]++
        let decision = state ? state.decision : await peekQuota(request)
        if (!decision) {
          await sendPolicyOnly(request, reply)
          return payload
        }
        const taken = decision.taken
        if (taken && !consumed) {
          try {
            await store.refund(taken)
            decision = { ...decision, windows: afterRefund(decision.windows), taken: undefined }
          } catch (error) {
            storeFailed(request, error)
            refundAgainLater(taken, error)
          }
        }
        reply.headers(quotaHeaders(decision.windows))
      } catch (error) {
        request.log.warn({ err: error }, 'could not settle the quota of this request')
      }
      return payload
    }

    function routeHooks(operation: QuotaOperation) {
      /** preHandler: the route's operation, for admit(); the reservation waits for admit(). */
      async function markOperation(request: FastifyRequest) {
        request.quotaOperation = operation
      }
      /** Answers given before preHandler (415, 413, 400) know the operation from onSend on too. */
      async function settle(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
        request.quotaOperation = operation
        return settleQuota(request, reply, payload)
      }
      return { preHandler: markOperation, onSend: settle }
    }

    async function reserveMany(request: FastifyRequest, operation: QuotaOperation, count: number): Promise<BulkReservation> {
      request.quotaOperation = operation
      const limits = await limitsOf(request.caller.workspaceId)
      const subject = subjectOf(request)
      // One atomic call for the whole batch when the store can; otherwise one reservation per slot, in order.
      let granted: number
      let latest: QuotaDecision
      const ids: string[] = []
      try {
        if (store.reserveMany) {
          ;({ granted, decision: latest } = await store.reserveMany(subject, limits, now(), count))
          ids.push(...(latest.taken?.ids ?? []))
        } else {
          granted = 0
          latest = await store.reserve(subject, limits, now())
          while (latest.taken) {
            ids.push(...latest.taken.ids)
            if (++granted >= count) break
            latest = await store.reserve(subject, limits, now())
          }
        }
        storeAnswered(request)
      } catch (error) {
        storeFailed(request, error)
        request.quotaState = { storeFailed: true }
        const late = error instanceof LateReservation ? error : undefined
        if (policy === 'deny') {
          if (late) giveBackLate(late, 0)
          // The whole request is refused, as a single create is (503 with Retry-After): no link of it can be created.
          throw unavailable('rate-limit store')
        }
        return { granted: count, settle: async (used) => void (late && giveBackLate(late, used)) }
      }
      let refused: Error | undefined
      if (granted < count) {
        counts.rejected[operation] += count - granted
        const full = exhaustedWindow(latest)
        refused = quotaExceeded(operation, full, full.resetSeconds)
      }
      const settle = async (used: number) => {
        const unused = { subject, ids: ids.slice(used) }
        if (unused.ids.length > 0) {
          try {
            await store.refund(unused)
            latest = { ...latest, windows: afterRefund(latest.windows, unused.ids.length) }
          } catch (error) {
            storeFailed(request, error)
            refundAgainLater(unused, error)
          }
        }
        request.quotaState = { decision: { ...latest, taken: undefined } }
      }
      return { granted, refused, settle }
    }

    const release = (request: FastifyRequest) => {
      request.quotaReleased = true
    }
    const keep = (request: FastifyRequest) => {
      request.quotaKept = true
    }
    app.decorate('quotas', { storeKind, counts, routeHooks, admit, reserveMany, release, keep })
  },
  { name: 'rate-limits', dependencies: ['database', 'auth', 'redis'] },
)
