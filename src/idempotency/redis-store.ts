/**
 * The Redis store of Idempotency-Key, shared by every instance on one Redis. One Redis key per workspace and
 * idempotency key, `<prefix>idem:{ws:<id>}:<key>` (the hash tag keeps a workspace's keys in one Redis Cluster
 * slot, as the quota counters do), holding JSON:
 *
 * - the claim `{"fingerprint", "token"}`, set with SET NX and a PX of the lease: atomic, so of two requests
 *   with one key exactly one sets it; the other reads it (a second round trip, only on that path);
 * - then the answer `{"fingerprint", "status", "headers", "body"}` for ANSWER_TTL_MS, written by a script only
 *   while the claim is still this request's (compare and set), so a request whose lease ended cannot overwrite
 *   the claim of the retry that took the key over. Releasing is the same compare and delete.
 *
 * Expiry is Redis's own (PX), so the service clock passed in is not used here. Every call is bounded by
 * REDIS_DEADLINE_MS, like every other use of Redis.
 */
import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { RedisUnavailableError, withDeadline, writeAgainLater } from '../redis/redis-client.js'
import {
  ANSWER_TTL_MS,
  CLAIM_ATTEMPTS,
  CLAIM_LEASE_MS,
  outcomeOf,
  type Claim,
  type ClaimOutcome,
  type IdempotencyScope,
  type IdempotencyStore,
  type StoredAnswer,
  type StoreTimes,
} from './idempotency-store.js'

/** KEYS[1] the key; ARGV[1] the claim as set; ARGV[2] the answer; ARGV[3] its lifetime in ms. */
const COMPLETE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`

/** KEYS[1] the key; ARGV[1] the claim as set. */
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

interface IdempotencyScripts {
  idempotencyComplete(key: string, claim: string, answer: string, ttlMs: number): Promise<number>
  idempotencyRelease(key: string, claim: string): Promise<number>
}

interface StoredValue {
  fingerprint: string
  token?: string
  status?: number
  headers?: Record<string, string>
  body?: string
}

/** How often a release Redis could not take is sent again (the claim's lease ends it anyway). */
const RELEASE_RETRY_MS = 1000

export class RedisIdempotencyStore implements IdempotencyStore {
  private readonly scripts: IdempotencyScripts
  private readonly answerTtlMs: number
  private readonly leaseMs: number

  constructor(
    private readonly redis: Redis,
    private readonly options: StoreTimes & { keyPrefix?: string; deadlineMs?: number } = {},
  ) {
    if (!('idempotencyComplete' in redis)) {
      redis.defineCommand('idempotencyComplete', { numberOfKeys: 1, lua: COMPLETE_SCRIPT })
      redis.defineCommand('idempotencyRelease', { numberOfKeys: 1, lua: RELEASE_SCRIPT })
    }
    this.scripts = redis as unknown as IdempotencyScripts
    this.answerTtlMs = options.answerTtlMs ?? ANSWER_TTL_MS
    this.leaseMs = options.leaseMs ?? CLAIM_LEASE_MS
  }

  keyOf(scope: IdempotencyScope): string {
    return `${this.options.keyPrefix ?? ''}idem:{ws:${scope.workspaceId}}:${scope.key}`
  }

  /** The claim exactly as stored: the scripts compare it byte for byte. */
  private static claimValue(claim: Claim): string {
    return JSON.stringify({ fingerprint: claim.fingerprint, token: claim.token })
  }

  private guard<T>(promise: Promise<T>): Promise<T> {
    return withDeadline(promise, this.options.deadlineMs)
  }

  async claim(scope: IdempotencyScope, fingerprint: string): Promise<ClaimOutcome> {
    const key = this.keyOf(scope)
    const claim: Claim = { scope, fingerprint, token: randomUUID() }
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      let set: string | null
      try {
        set = await this.guard(this.redis.set(key, RedisIdempotencyStore.claimValue(claim), 'PX', this.leaseMs, 'NX'))
      } catch (error) {
        // Given up on at its deadline, the SET may still be made: its request is answered 503 (not run, safe to
        // send again), so a claim made that late is nobody's and is released, or the retry would get 409s. Also
        // when the SET fails with its connection (closed while Redis was frozen): Redis may still make it on
        // waking. The release deletes the key only while it holds this claim.
        if (error instanceof RedisUnavailableError && error.late) {
          error.late.then(
            (late) => void (late === 'OK' && this.releaseEventually(claim)),
            () => this.releaseEventually(claim),
          )
        }
        throw error
      }
      if (set === 'OK') return { kind: 'claimed', claim }
      const existing = await this.guard(this.redis.get(key))
      // Expired between the two calls: the key is free again.
      if (existing === null) continue
      const value = JSON.parse(existing) as StoredValue
      const answer = value.status === undefined ? null : { status: value.status, headers: value.headers ?? {}, body: value.body ?? '' }
      return outcomeOf({ fingerprint: value.fingerprint, answer }, fingerprint)
    }
    return { kind: 'in-progress' }
  }

  async complete(claim: Claim, answer: StoredAnswer): Promise<boolean> {
    const value = JSON.stringify({ fingerprint: claim.fingerprint, ...answer } satisfies StoredValue)
    const stored = await this.guard(
      this.scripts.idempotencyComplete(this.keyOf(claim.scope), RedisIdempotencyStore.claimValue(claim), value, this.answerTtlMs),
    )
    return stored === 1
  }

  async release(claim: Claim): Promise<void> {
    await this.guard(this.scripts.idempotencyRelease(this.keyOf(claim.scope), RedisIdempotencyStore.claimValue(claim)))
  }

  /** Releases a claim nobody holds, sent again every second while Redis cannot take it, for as long as its lease. */
  private releaseEventually(claim: Claim): void {
    this.release(claim).catch((error: unknown) =>
      writeAgainLater(() => this.release(claim), error, {
        everyMs: RELEASE_RETRY_MS,
        forMs: this.leaseMs,
        giveUp: () => {},
        // A claim Redis makes on waking from a long freeze is released once it answers again, however late.
        ready: () => this.redis.status === 'ready',
      }),
    )
  }

  /** The client is the app's (closed with it). */
  async close(): Promise<void> {}
}
