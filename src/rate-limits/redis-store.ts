/**
 * The Redis quota store: exact across every instance sharing one Redis, because each reservation is one
 * Lua script (sliding-window-scripts.ts) that Redis runs atomically: one round trip per request, plus one
 * more for the refund of a request that failed.
 *
 * Keys: `<prefix>rl:{ws:<id>}:<operation>:hour` and `…:day`. The hash tag `{ws:<id>}` puts all of one
 * workspace's keys in one Redis Cluster slot, so a script may touch both windows of an operation.
 */
import { Redis } from 'ioredis'
import { RESERVE_SCRIPT, REFUND_SCRIPT } from './sliding-window-scripts.js'
import {
  QUOTA_WINDOWS,
  limitOf,
  pastBuckets,
  toDecision,
  type QuotaDecision,
  type QuotaLimits,
  type QuotaStore,
  type QuotaSubject,
  type QuotaTaken,
} from './quota-store.js'

/** The longest a request waits on Redis (contract section 8). */
export const REDIS_DEADLINE_MS = 250

export class RedisUnavailableError extends Error {
  override name = 'RedisUnavailableError'
}

interface QuotaScripts {
  quotaReserve(...args: (string | number)[]): Promise<number[]>
  quotaRefund(...args: (string | number)[]): Promise<number>
}

/**
 * A client that never makes a request wait: commands fail at once while disconnected (no offline queue);
 * a connection that stops answering is dropped after 2 s (socketTimeout), failing what it still holds;
 * it keeps reconnecting in the background (ioredis's default back-off, at most 2 s apart), so the service
 * recovers by itself when Redis returns. The 250 ms a request may wait is enforced per call (withDeadline),
 * not by ioredis's commandTimeout: that timer fires before a reply already received is read when the event
 * loop was busy for a moment, and under RATE_LIMIT_ON_REDIS_ERROR=allow such a request would go through
 * unlimited (a burst test on the in-process PGlite database saw the quota overshot by one).
 */
export function createRedisClient(url: string): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // A reservation re-sent after its request gave up would take a slot nobody uses.
    autoResendUnfulfilledCommands: false,
    socketTimeout: 2000,
    connectTimeout: 1000,
  })
  // Failures are reported where they matter, by the requests that meet them (src/plugins/rate-limits.ts).
  redis.on('error', () => {})
  return redis
}

/** Resolves once the client is ready or has failed its first attempt (at most `ms`): start-up need not wait longer. */
export function firstConnection(redis: Redis, ms = 1000): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer)
      redis.off('ready', done)
      redis.off('error', done)
      resolve(redis.status === 'ready')
    }
    const timer = setTimeout(done, ms)
    redis.once('ready', done)
    redis.once('error', done)
  })
}

/**
 * Bounds a whole call (a NOSCRIPT retry included) to `ms`. When the timer fires, a reply that has arrived
 * but not been read yet (the event loop was busy) still wins: sockets are read in the poll phase, which
 * runs before setImmediate callbacks.
 */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => setImmediate(() => reject(new RedisUnavailableError(`Redis did not answer within ${ms} ms`))),
      ms,
    )
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

export class RedisQuotaStore implements QuotaStore {
  private readonly scripts: QuotaScripts

  /** `ownsClient`: close the client with the store. */
  constructor(
    readonly redis: Redis,
    private readonly options: { keyPrefix?: string; ownsClient?: boolean; deadlineMs?: number } = {},
  ) {
    if (!('quotaReserve' in redis)) {
      redis.defineCommand('quotaReserve', { numberOfKeys: 2, lua: RESERVE_SCRIPT })
      redis.defineCommand('quotaRefund', { numberOfKeys: 2, lua: REFUND_SCRIPT })
    }
    this.scripts = redis as unknown as QuotaScripts
  }

  /** The keys of one subject, hour then day. */
  keys(subject: QuotaSubject): string[] {
    const base = `${this.options.keyPrefix ?? ''}rl:{ws:${subject.workspaceId}}:${subject.operation}`
    return QUOTA_WINDOWS.map((window) => `${base}:${window.name}`)
  }

  private async run(subject: QuotaSubject, limits: QuotaLimits, now: number, take: boolean): Promise<QuotaDecision> {
    const args: (string | number)[] = [...this.keys(subject), Math.floor(now), take ? '1' : '0']
    for (const window of QUOTA_WINDOWS) {
      args.push(limitOf(limits, window), window.bucketSeconds * 1000, pastBuckets(window))
    }
    const reply = await this.guard(this.scripts.quotaReserve(...args))
    const counts = QUOTA_WINDOWS.map((_, i) => ({
      bucket: Number(reply[1 + i * 3]),
      used: Number(reply[2 + i * 3]),
      freeAt: Number(reply[3 + i * 3]),
    }))
    return toDecision(subject, limits, now, reply[0] === 1, counts)
  }

  private guard<T>(promise: Promise<T>): Promise<T> {
    return withDeadline(promise, this.options.deadlineMs ?? REDIS_DEADLINE_MS)
  }

  reserve(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision> {
    return this.run(subject, limits, now, true)
  }

  peek(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision> {
    return this.run(subject, limits, now, false)
  }

  async refund(taken: QuotaTaken): Promise<void> {
    await this.guard(this.scripts.quotaRefund(...this.keys(taken.subject), ...taken.buckets))
  }

  async close(): Promise<void> {
    if (!this.options.ownsClient) return
    // QUIT fails at once when disconnected (no offline queue); disconnect then stops the reconnecting.
    await this.redis.quit().catch(() => {})
    this.redis.disconnect()
  }
}
