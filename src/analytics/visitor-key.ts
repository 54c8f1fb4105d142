/**
 * The unique-visitor key, as privacy-first analytics tools make it: a keyed hash (HMAC-SHA-256, cut to 64 bits)
 * of the visitor's address and User-Agent under a random key of the UTC day. The address itself is never
 * stored, and once a day's key is gone (it lives two days: yesterday's visits may still be in a batch) the
 * hashes of that day cannot be linked back to an address or to the visitor's hashes of another day.
 *
 * With REDIS_URL, every instance takes the day's key from Redis (the first to ask creates it), so a visitor
 * has one key a day whichever instance answers; without Redis, or while it cannot be reached, the key is
 * this process's own (a visitor seen by two instances then counts twice). A process that fell back asks Redis
 * again every FALLBACK_RETRY_MS, and takes the shared key once Redis answers: the fallback lasts as long as the
 * outage, not the rest of the day. A process that has the shared key checks every SHARED_RECHECK_MS that Redis
 * still holds it, and puts it back if Redis lost it (restarted empty, evicted it): otherwise an instance started
 * afterwards would make a new key, and the instances would count the same visitor under two keys all day. (One
 * that asks in the seconds before the key is put back still makes its own, and keeps it for the day.)
 */
import type { Redis } from 'ioredis'
import { createHmac, randomBytes } from 'node:crypto'
import { withDeadline } from '../redis/redis-client.js'

const KEY_LIFETIME_S = 2 * 86_400
/** How long a process's own key of a day is used before Redis is asked again for the shared one. */
export const FALLBACK_RETRY_MS = 10_000
/** How often a process checks that Redis still holds the shared key of the day it uses. */
export const SHARED_RECHECK_MS = 10_000

export interface VisitorKeysOptions {
  redis?: Redis | null
  keyPrefix?: string
  /** Called when Redis cannot give a day's key and a key of this process is used instead. */
  onFallback?: (error: unknown) => void
  /** The clock of the retries (tests). */
  now?: () => number
}

interface DayKey {
  key: Buffer
  /** Redis's key of the day, or this process's own. */
  shared: boolean
  /** When Redis was last asked. */
  askedAt: number
}

export class VisitorKeys {
  private readonly keys = new Map<string, DayKey>()

  constructor(private readonly options: VisitorKeysOptions = {}) {}

  /** The key of the UTC day (YYYY-MM-DD): Redis's, fetched once per process and day, or this process's own. */
  async keyOf(day: string): Promise<Buffer> {
    const now = this.options.now?.() ?? Date.now()
    const known = this.keys.get(day)
    if (known && now - known.askedAt < (known.shared ? SHARED_RECHECK_MS : FALLBACK_RETRY_MS)) return known.key
    const fromRedis = await this.shared(day, known?.key)
    // A process that hashed with a shared key keeps it even if Redis now holds another (made by an instance that
    // asked after Redis lost the key and before this one put it back): switching would count every visitor this
    // process saw today a second time. A process on its own key (Redis was away) takes Redis's.
    const shared = known?.shared ? known.key : fromRedis
    // While Redis is away the process keeps one key of its own for the day: its visitors still count once on it.
    const entry = { key: shared ?? known?.key ?? randomBytes(32), shared: shared !== null, askedAt: now }
    this.keys.set(day, entry)
    // Only today's and yesterday's keys are ever needed.
    for (const old of this.keys.keys()) if (this.keys.size > 2 && old < day) this.keys.delete(old)
    return entry.key
  }

  /** Redis's key of the day, made from `offered` (the key this process uses, if any) when Redis holds none. */
  private async shared(day: string, offered: Buffer | undefined): Promise<Buffer | null> {
    const { redis, keyPrefix = '' } = this.options
    if (!redis) return null
    const name = `${keyPrefix}analytics:visitor-key:${day}`
    let failure: unknown
    try {
      await withDeadline(redis.set(name, (offered ?? randomBytes(32)).toString('base64'), 'EX', KEY_LIFETIME_S, 'NX'))
    } catch (error) {
      // A Redis out of memory refuses the write, and may still hold the key: read it all the same.
      failure = error
    }
    try {
      const value = await withDeadline(redis.get(name))
      if (value) return Buffer.from(value, 'base64')
    } catch (error) {
      failure = error
    }
    this.options.onFallback?.(failure ?? new Error('Redis holds no visitor key for the day'))
    return null
  }
}

/** The visitor's hash under a day's key: a signed 64-bit integer as decimal text (PostgreSQL's bigint). */
export function visitorHash(key: Buffer, address: string, userAgent: string | undefined): string {
  const digest = createHmac('sha256', key).update(address).update('\n').update(userAgent ?? '').digest()
  return digest.readBigInt64BE(0).toString()
}
