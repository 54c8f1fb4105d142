/**
 * Makes guessing tokens not pay: after `limit` requests with a bad token from one client address within
 * a window, every request from that address is refused until the window has passed (so a lucky guess
 * cannot be told apart). Counts live in this process; entries expire with their window.
 *
 * With REDIS_URL the bad tokens are counted in Redis too (one atomic script per bad token, nothing for a good
 * one), so an address gets `limit` tries a window across all instances, not `limit` per instance; an instance
 * that learns from Redis that the address is over the limit refuses it, from then on at no cost, until the
 * window Redis keeps ends. While Redis does not answer, the process's own count still applies.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import { withDeadline } from '../redis/redis-client.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

/**
 * Most addresses followed at once: past it the oldest windows are forgotten, so memory stays bounded however many
 * addresses send bad tokens (an attacker with that many addresses gets their tries anyway).
 */
export const MAX_TRACKED_ADDRESSES = 100_000

/** Counts an address's bad tokens for every instance: how many in its window so far, and when that window ends. */
export interface SharedFailureCount {
  count(address: string, windowMs: number): Promise<{ failures: number; endsInMs: number }>
}

export interface BadTokenThrottleOptions {
  /** Bad tokens an address may send in a window (default 30); the next is refused. */
  limit?: number
  /** The window, in ms (default a minute), from the address's first bad token. */
  windowMs?: number
  now?: () => number
  /** The count every instance shares (Redis), beside the process's own. */
  shared?: SharedFailureCount
}

export class BadTokenThrottle {
  private readonly windows = new Map<string, { startedAt: number; failures: number }>()
  /** Addresses over the limit by the shared count, until when (ms). */
  private readonly blockedUntil = new LRUCache<string, number>({ max: MAX_TRACKED_ADDRESSES })
  /** Requests refused (429) because their address was blocked: metrics. */
  refusals = 0

  private readonly limit: number
  private readonly windowMs: number
  private readonly now: () => number
  private readonly shared?: SharedFailureCount

  constructor(options: BadTokenThrottleOptions = {}) {
    this.limit = options.limit ?? 30
    this.windowMs = options.windowMs ?? 60_000
    this.now = options.now ?? Date.now
    this.shared = options.shared
  }

  /** Seconds until the address may try again, or 0 when it is not blocked. */
  blockedFor(address: string): number {
    const now = this.now()
    const until = this.blockedUntil.get(address)
    if (until !== undefined && until > now) return Math.max(1, Math.ceil((until - now) / 1000))
    const window = this.current(address)
    if (!window || window.failures <= this.limit) return 0
    return Math.max(1, Math.ceil((window.startedAt + this.windowMs - now) / 1000))
  }

  /**
   * Counts one more bad token from the address (in this process at once, then in the shared count); resolves to
   * blockedFor(address) after counting it.
   */
  async recordFailure(address: string): Promise<number> {
    const window = this.current(address)
    if (window) window.failures++
    else this.windows.set(address, { startedAt: this.now(), failures: 1 })
    this.forgetEnded()
    if (this.shared) {
      const counted = await this.shared.count(address, this.windowMs).catch(() => null)
      if (counted && counted.failures > this.limit) this.blockedUntil.set(address, this.now() + counted.endsInMs)
    }
    return this.blockedFor(address)
  }

  /** Addresses followed now (tests). */
  get tracked(): number {
    return this.windows.size
  }

  private current(address: string) {
    const window = this.windows.get(address)
    if (window && this.now() - window.startedAt >= this.windowMs) {
      this.windows.delete(address)
      return undefined
    }
    return window
  }

  /**
   * Windows are kept in the order they began (an address whose window ended begins a new one at the end), so the
   * ended ones are at the front: the walk stops at the first still running, a step or two per failure. (A walk of
   * every window at each failure past 10,000 addresses made each bad token cost milliseconds.)
   */
  private forgetEnded(): void {
    const now = this.now()
    for (const [address, window] of this.windows) {
      if (now - window.startedAt < this.windowMs && this.windows.size <= MAX_TRACKED_ADDRESSES) return
      this.windows.delete(address)
    }
  }
}

// KEYS[1]: one address's bad tokens; ARGV[1]: the window (ms). A fixed window from the first bad token, as in the
// process. Returns the count and the milliseconds left in the window.
const COUNT_SCRIPT = `
local failures = redis.call('INCR', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {failures, left}
`

interface CountScript {
  badTokenCount(key: string, windowMs: number): Promise<[number, number]>
}

/** The shared count in Redis; a Redis that does not answer in time is logged (at most once a minute) and thrown on. */
export class RedisFailureCount implements SharedFailureCount {
  private readonly outageWarning = new OccasionalWarning()

  constructor(
    private readonly redis: Redis,
    private readonly log: FastifyBaseLogger,
    private readonly keyPrefix = '',
  ) {
    if (!('badTokenCount' in redis)) redis.defineCommand('badTokenCount', { numberOfKeys: 1, lua: COUNT_SCRIPT })
  }

  async count(address: string, windowMs: number): Promise<{ failures: number; endsInMs: number }> {
    try {
      const script = (this.redis as unknown as CountScript).badTokenCount
      const [failures, endsInMs] = await withDeadline(script.call(this.redis, `${this.keyPrefix}bad-tokens:${address}`, windowMs))
      return { failures: Number(failures), endsInMs: Number(endsInMs) }
    } catch (error) {
      if (this.outageWarning.occurred() !== null) {
        this.log.warn({ err: error }, 'auth: Redis did not answer for the bad-token count; counting them in this process meanwhile')
      }
      throw error
    }
  }
}
