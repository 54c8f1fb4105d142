/**
 * Wrong passwords per link and client address (contract section 11, step 3): at most PASSWORD_TRIES in any
 * PASSWORD_WINDOW_MS (sliding). A try is taken before the password is checked and given back when it was
 * right, so concurrent guesses count too and the try past the limit is refused unchecked (429), whatever it is.
 *
 * With REDIS_URL the tries live in Redis (a sorted set per link and address, one atomic script per try), shared
 * by every instance; otherwise, and while Redis does not answer within its deadline, in this process.
 */
import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import { withDeadline } from '../redis/redis-client.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

export const PASSWORD_TRIES = 10
export const PASSWORD_WINDOW_MS = 15 * 60 * 1000

/** A try taken (`ticket` gives it back), or the seconds until one is free. */
export type TryDecision = { allowed: true; ticket: string } | { allowed: false; retryAfterSeconds: number }

export interface PasswordThrottle {
  take(link: number, address: string, now: number): Promise<TryDecision>
  /** The password was right: the try does not count. */
  giveBack(link: number, address: string, ticket: string): void
}

const retryAfter = (oldest: number, now: number) => Math.max(1, Math.ceil((oldest + PASSWORD_WINDOW_MS - now) / 1000))

/**
 * The most link-and-address pairs the in-process count holds: some 300 bytes each at most (30 MB), and as many as
 * an attacker must try other pairs from to push out one pair's count.
 */
export const MAX_MEMORY_PAIRS = 100_000

export class MemoryPasswordThrottle implements PasswordThrottle {
  // Per pair its tries as numbers, [at, id, at, id…]: a try costs a visitor nothing when its password is too long to
  // check, so pairs are cheap to make. The least recent go past the bound, and a pair once its tries are past.
  private readonly tries = new LRUCache<string, number[]>({ max: MAX_MEMORY_PAIRS, ttl: PASSWORD_WINDOW_MS })
  private lastId = 0

  /** How many link-and-address pairs it holds tries of. */
  get pairs(): number {
    return this.tries.size
  }

  async take(link: number, address: string, now: number): Promise<TryDecision> {
    const key = `${link} ${address}`
    const held = this.tries.get(key) ?? []
    const recent: number[] = []
    for (let i = 0; i < held.length; i += 2) if (held[i] > now - PASSWORD_WINDOW_MS) recent.push(held[i], held[i + 1])
    if (recent.length / 2 >= PASSWORD_TRIES) {
      this.tries.set(key, recent)
      return { allowed: false, retryAfterSeconds: retryAfter(recent[0], now) }
    }
    const id = ++this.lastId
    recent.push(now, id)
    this.tries.set(key, recent)
    return { allowed: true, ticket: String(id) }
  }

  giveBack(link: number, address: string, ticket: string): void {
    const key = `${link} ${address}`
    const held = this.tries.get(key)
    if (!held) return
    const id = Number(ticket)
    const recent: number[] = []
    for (let i = 0; i < held.length; i += 2) if (held[i + 1] !== id) recent.push(held[i], held[i + 1])
    if (recent.length > 0) this.tries.set(key, recent)
    else this.tries.delete(key)
  }
}

// KEYS[1]: the tries of one link and address; ARGV: now (ms), window (ms), limit, ticket.
// Returns {1, 0} when the try is taken, {0, oldest try} when the limit is reached.
const TAKE_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(oldest[2])}
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, 0}
`

interface ThrottleScripts {
  passwordTryTake(key: string, now: number, window: number, limit: number, ticket: string): Promise<[number, number]>
}

export class RedisPasswordThrottle implements PasswordThrottle {
  private readonly fallback = new MemoryPasswordThrottle()
  private readonly outageWarning = new OccasionalWarning()
  /** Tries Redis did not count in time (the fallback did): metrics. */
  redisFailures = 0

  constructor(
    private readonly redis: Redis,
    private readonly log: FastifyBaseLogger,
    private readonly keyPrefix = '',
  ) {
    if (!('passwordTryTake' in redis)) redis.defineCommand('passwordTryTake', { numberOfKeys: 1, lua: TAKE_SCRIPT })
  }

  private key(link: number, address: string): string {
    return `${this.keyPrefix}password-tries:${link}:${address}`
  }

  async take(link: number, address: string, now: number): Promise<TryDecision> {
    const ticket = `${now}:${randomBytes(6).toString('base64url')}`
    try {
      const script = (this.redis as unknown as ThrottleScripts).passwordTryTake
      const [taken, oldest] = await withDeadline(
        script.call(this.redis, this.key(link, address), now, PASSWORD_WINDOW_MS, PASSWORD_TRIES, ticket),
      )
      return taken === 1 ? { allowed: true, ticket } : { allowed: false, retryAfterSeconds: retryAfter(Number(oldest), now) }
    } catch (error) {
      // Still limited, per instance, rather than not at all.
      this.redisFailures++
      this.warn(error)
      // A script given up on at its deadline may still run once Redis answers: that try then counts in Redis too,
      // where it should, since only Redis decides once it answers again (taking it back there would let every
      // try made while Redis was slow go uncounted).
      return this.fallback.take(link, address, now)
    }
  }

  giveBack(link: number, address: string, ticket: string): void {
    this.fallback.giveBack(link, address, ticket)
    withDeadline(this.redis.zrem(this.key(link, address), ticket)).catch(() => {})
  }

  private warn(error: unknown): void {
    if (this.outageWarning.occurred() === null) return
    this.log.warn({ err: error }, 'redirects: Redis did not answer for the password tries; counting them in this process meanwhile')
  }
}
