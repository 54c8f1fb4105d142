/**
 * Idempotency-Key on the routes that create (draft-ietf-httpapi-idempotency-key-header): a client that sends a
 * key may send the same request again, as often as it likes for 24 hours, and it is served once.
 *
 * - preValidation (after authentication, so the workspace is known; after the body has arrived, so it can be
 *   fingerprinted; before the schema, the quota and the handler): a request with a key claims it. The first
 *   one runs; the same request again gets the first one's answer (replay.ts); the same request while the first
 *   is still being served gets 409 idempotency_key_in_use; another request with that key gets 422
 *   idempotency_key_reused. A replay is answered right there: no quota is taken, nothing is read or stored.
 * - onSend (the route's last): the claim's answer is kept when it is final (a success, or a client error of the
 *   request's own), else the key is released so that a retry runs again.
 * - onResponse: a claim still held (an answer that never passed onSend) is released.
 *
 * Without the header nothing changes and nothing is read. When the store cannot be reached, a request with a
 * key is answered 503 unavailable (Retry-After): running it without the guarantee the client asked for could
 * make the duplicate it sends the key to avoid; the client's retry is safe.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'
import { unavailable } from '../errors/app-error.js'
import { idempotencyKeyInUse, idempotencyKeyReused } from '../errors/idempotency-errors.js'
import { IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey, requestFingerprint } from '../idempotency/idempotency-key.js'
import { ANSWER_TTL_MS, CLAIM_LEASE_MS, type Claim, type IdempotencyStore, type StoreTimes, type StoredAnswer } from '../idempotency/idempotency-store.js'
import { PostgresIdempotencyStore } from '../idempotency/postgres-store.js'
import { RedisIdempotencyStore } from '../idempotency/redis-store.js'
import { answerToKeep, sendAnswer } from '../idempotency/replay.js'
import { writeAgainLater } from '../redis/redis-client.js'
import { sweepIdempotentCreates } from '../links/link-repository.js'

export interface IdempotencyOptions extends StoreTimes {
  /** A store of the caller's; otherwise Redis when REDIS_URL is set, else the database. */
  store?: IdempotencyStore
  /** The clock of the database store's expiries, in ms (tests drive it; Redis keeps its own time). */
  now?: () => number
  /** Put after REDIS_KEY_PREFIX before every Redis key (tests use one per run). */
  keyPrefix?: string
}

type RequestHook = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>
type PayloadHook = (request: FastifyRequest, reply: FastifyReply, payload: unknown) => Promise<unknown>

export interface Idempotency {
  /** 'redis', 'database' or 'custom'. */
  readonly storeKind: string
  /** The hooks of a route that honours Idempotency-Key; `operation` tells its requests from another route's. */
  routeHooks(operation: string): { preValidation: RequestHook; onSend: PayloadHook; onResponse: RequestHook }
  /** The keys' clock (ms) and how long a key's answer lasts: what a keyed create stores with its link honours both. */
  now(): number
  readonly answerTtlMs: number
  /** Frees the request's claim without keeping its answer: the key belongs to another request's body. */
  release(request: FastifyRequest): Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    idempotency: Idempotency
  }
  interface FastifyRequest {
    /** The key this request holds while it is served (null without a key, and once its answer is kept). */
    idempotencyClaim: Claim | null
  }
}

/** How often the keys of creates past their 24 hours are deleted. */
const CREATES_SWEEP_EVERY_MS = 10 * 60_000

/** How often an answer the store could not take is offered again (keepAnswerLater). */
const KEEP_RETRY_MS = 1000

export default fp(
  async function idempotency(app: FastifyInstance, options: { config: Config; idempotency?: IdempotencyOptions }) {
    const settings = options.idempotency ?? {}
    const now = settings.now ?? Date.now
    const times = { answerTtlMs: settings.answerTtlMs, leaseMs: settings.leaseMs }
    let store: IdempotencyStore
    let storeKind: string
    if (settings.store) {
      store = settings.store
      storeKind = 'custom'
    } else if (app.redis) {
      store = new RedisIdempotencyStore(app.redis, { ...times, keyPrefix: options.config.redisKeyPrefix + (settings.keyPrefix ?? '') })
      storeKind = 'redis'
    } else {
      const onSweepError = (error: unknown) => app.log.warn({ err: error }, 'idempotency keys: the sweep of expired keys failed')
      store = new PostgresIdempotencyStore(app.db, { ...times, onSweepError })
      storeKind = 'database'
    }
    app.addHook('onClose', async () => store.close())
    app.decorateRequest('idempotencyClaim', null)
    // The links keyed creates made, kept with them for a retry after a crash (link-routes.ts), for the key's 24 h.
    const sweep = setInterval(() => {
      sweepIdempotentCreates(app.db).catch((error) => app.log.warn({ err: error }, 'idempotency keys: the sweep of keyed creates failed'))
    }, CREATES_SWEEP_EVERY_MS).unref()
    app.addHook('onClose', async () => clearInterval(sweep))

    async function settle(request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<void> {
      const claim = request.idempotencyClaim
      if (!claim) return
      request.idempotencyClaim = null
      const answer = answerToKeep(reply, payload)
      try {
        if (!answer) await store.release(claim)
        else if (!(await store.complete(claim, answer, now()))) {
          request.log.warn('idempotency key: the request outlasted its claim; its answer is not kept')
        }
      } catch (error) {
        // The answer still goes out, and is kept once the store is back: until then a retry gets 409.
        request.log.warn({ err: error }, 'idempotency key: the answer could not be kept yet; trying again')
        if (answer) keepAnswerLater(claim, answer, error)
      }
    }

    /**
     * An answer the store could not take is offered again every second while the claim's lease runs: should the
     * lease end first, a retry would run the request a second time. A write that was sent and only answered late
     * (RedisUnavailableError with `late`) is offered again only if it turns out to have failed.
     */
    function keepAnswerLater(claim: Claim, answer: StoredAnswer, error: unknown): void {
      writeAgainLater(() => store.complete(claim, answer, now()), error, {
        everyMs: KEEP_RETRY_MS,
        forMs: settings.leaseMs ?? CLAIM_LEASE_MS,
        giveUp: (failure) =>
          app.log.warn({ err: failure }, 'idempotency key: the answer could not be kept; a retry after the lease runs the request again'),
      })
    }

    function routeHooks(operation: string) {
      async function claimKey(request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
        const header = request.headers[IDEMPOTENCY_KEY_HEADER]
        if (header === undefined) return
        const key = parseIdempotencyKey(header, request.raw.rawHeaders)
        const fingerprint = requestFingerprint(operation, request.bodyBytes)
        let outcome
        try {
          outcome = await store.claim({ workspaceId: request.caller.workspaceId, key }, fingerprint, now())
        } catch (error) {
          // Logged by the error handler, with this cause, once a minute for the whole outage (src/plugins/errors.ts).
          throw Object.assign(unavailable('idempotency key store'), { cause: error })
        }
        switch (outcome.kind) {
          case 'claimed':
            request.idempotencyClaim = outcome.claim
            return
          case 'in-progress':
            throw idempotencyKeyInUse()
          case 'mismatch':
            throw idempotencyKeyReused()
          case 'answered':
            request.log.info({ status: outcome.answer.status }, 'idempotency key: the first answer sent again')
            return sendAnswer(reply, outcome.answer)
        }
      }
      async function keepAnswer(request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
        await settle(request, reply, payload)
        return payload
      }
      async function releaseUnanswered(request: FastifyRequest, reply: FastifyReply): Promise<void> {
        await settle(request, reply, undefined)
      }
      return { preValidation: claimKey, onSend: keepAnswer, onResponse: releaseUnanswered }
    }

    async function release(request: FastifyRequest): Promise<void> {
      const claim = request.idempotencyClaim
      if (!claim) return
      request.idempotencyClaim = null
      await store.release(claim)
    }

    app.decorate('idempotency', { storeKind, routeHooks, now, answerTtlMs: settings.answerTtlMs ?? ANSWER_TTL_MS, release })
  },
  { name: 'idempotency', dependencies: ['database', 'auth', 'redis'] },
)
