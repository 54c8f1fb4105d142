/**
 * The one Redis client of a service instance (rate-limit counters, autofill cache) and the rule every
 * use of it follows: no request waits on Redis longer than REDIS_DEADLINE_MS (contract section 8).
 */
import { Redis } from 'ioredis'

/** The longest a request waits on Redis (contract section 8). */
export const REDIS_DEADLINE_MS = 250

export class RedisUnavailableError extends Error {
  override name = 'RedisUnavailableError'

  /** `late`: the call given up on at its deadline, which Redis may still run (and answer) after it. */
  constructor(
    message: string,
    readonly late?: Promise<unknown>,
  ) {
    super(message)
  }
}

/** The longest a write sent again waits for Redis to be ready before its own window starts to run out. */
export const WAIT_FOR_REDIS_MS = 15 * 60_000

/**
 * A write that must reach Redis after all (a quota refund, an idempotent answer to keep), `error` being why its
 * first try failed: sent again every `everyMs` until it succeeds, or `giveUp` once `forMs` would have passed since
 * the first try. A write given up on at its deadline but sent (RedisUnavailableError with `late`) is sent again
 * only if it turns out to have failed.
 */
export function writeAgainLater(
  write: () => Promise<unknown>,
  error: unknown,
  options: {
    everyMs: number
    forMs: number
    giveUp: (error: unknown) => void
    /**
     * The client's readiness: while it is not ready (Redis frozen or away) the `forMs` window does not run out, up
     * to WAIT_FOR_REDIS_MS in all. For a write that must follow what Redis will still run on waking.
     */
    ready?: () => boolean
  },
  started = Date.now(),
  first = started,
): void {
  const again = (failure: unknown) => {
    if (options.ready && !options.ready() && Date.now() - first < WAIT_FOR_REDIS_MS) started = Date.now()
    if (Date.now() - started + options.everyMs >= options.forMs) return options.giveUp(failure)
    setTimeout(() => write().catch((next: unknown) => writeAgainLater(write, next, options, started, first)), options.everyMs).unref()
  }
  if (error instanceof RedisUnavailableError && error.late) error.late.catch(again)
  else again(error)
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
export function withDeadline<T>(promise: Promise<T>, ms = REDIS_DEADLINE_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => setImmediate(() => reject(new RedisUnavailableError(`Redis did not answer within ${ms} ms`, promise))),
      ms,
    )
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

/** Closes a client for good: QUIT fails at once when disconnected (no offline queue); disconnect then stops the reconnecting. */
export async function closeRedisClient(redis: Redis): Promise<void> {
  await redis.quit().catch(() => {})
  redis.disconnect()
}
