/**
 * Per-workspace quotas (contract section 8): what a store counts and what it answers. Both stores
 * (redis-store.ts, memory-store.ts) count the same way:
 *
 * Each window is split into time buckets (the hour into 10 s buckets, the day into 5 min buckets). A
 * request counts in the bucket of the moment it was taken, and a bucket counts while it is one of the
 * window's last `seconds / bucketSeconds + 1` buckets. A request therefore counts for between `seconds`
 * and `seconds + bucketSeconds` after it was taken: never less than the window (the limit is never
 * looser than a true sliding window), at most one bucket longer. Memory per workspace and operation is
 * bounded by the bucket count (361 + 289 counters), whatever the traffic.
 */

export type QuotaOperation = 'create' | 'update'

export interface QuotaLimits {
  hour: number
  day: number
}

export interface QuotaSubject {
  workspaceId: number
  operation: QuotaOperation
}

export const QUOTA_WINDOWS = [
  { name: 'hour', seconds: 3600, bucketSeconds: 10 },
  { name: 'day', seconds: 86_400, bucketSeconds: 300 },
] as const

export type QuotaWindow = (typeof QUOTA_WINDOWS)[number]

/** Buckets that still count besides the current one. */
export const pastBuckets = (window: QuotaWindow) => window.seconds / window.bucketSeconds

/** Where one window stands for the subject, after the reservation (or the refund). */
export interface WindowUsage {
  name: QuotaWindow['name']
  seconds: number
  limit: number
  /** Requests counted in the window now. */
  used: number
  remaining: number
  /**
   * Seconds until the window frees a slot: when full, until the one that makes room stops counting
   * (an accurate Retry-After); otherwise until the oldest counted request stops counting; 0 when
   * nothing is counted.
   */
  resetSeconds: number
}

/** What a refund gives back: the exact buckets a reservation counted in, one per window. */
/**
 * The store did not answer a reservation in time, and may still make it afterwards (Redis runs a script it has
 * received even once its caller stopped waiting): `late` settles with that reservation, whose slot nobody asked
 * for then, so that it can be given back.
 */
export class LateReservation extends Error {
  override name = 'LateReservation'

  constructor(
    override readonly cause: Error,
    readonly late: Promise<{ decision: QuotaDecision; granted: number }>,
  ) {
    super(cause.message)
  }
}

export interface QuotaTaken {
  subject: QuotaSubject
  buckets: number[]
}

export interface QuotaDecision {
  allowed: boolean
  /** In QUOTA_WINDOWS order: hour, day. */
  windows: WindowUsage[]
  /** Set when a slot was taken (allowed reservations only). */
  taken?: QuotaTaken
}

export interface QuotaStore {
  /** Checks both windows and, when both have room, takes one slot in each, atomically. */
  reserve(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision>
  /**
   * Up to `count` slots in one atomic call, as many as both windows have room for (bulk create); the decision
   * is the one after taking them (allowed when at least one was). Stores without it take slots one by one.
   */
  reserveMany?(subject: QuotaSubject, limits: QuotaLimits, now: number, count: number): Promise<{ decision: QuotaDecision; granted: number }>
  /** Where the windows stand, taking nothing. */
  peek(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision>
  /** Gives back what a reservation took (the buckets that have stopped counting already are left alone). */
  refund(taken: QuotaTaken): Promise<void>
  close(): Promise<void>
}

/** What a store computes per window: the bucket now, the count, and when slots free (see freeAt). */
export interface WindowCount {
  bucket: number
  used: number
  /**
   * When (ms, the service clock) enough counted requests have stopped counting to leave a slot free
   * (or, with room already, when the oldest stops counting): the end of that request's bucket's
   * counting time. 0 when nothing is counted, -1 when no expiry frees a slot (a quota of 0).
   */
  freeAt: number
}

export const limitOf = (limits: QuotaLimits, window: QuotaWindow) => limits[window.name]

/** How many of the oldest counted requests must stop counting before one more fits. */
export const requestsToFree = (used: number, limit: number) => Math.max(1, used - limit + 1)

export function toDecision(
  subject: QuotaSubject,
  limits: QuotaLimits,
  now: number,
  allowed: boolean,
  counts: WindowCount[],
): QuotaDecision {
  const windows = QUOTA_WINDOWS.map((window, i): WindowUsage => {
    const limit = limitOf(limits, window)
    const { used, freeAt } = counts[i]
    const remaining = Math.max(0, limit - used)
    // A full window that no expiry frees (a quota of 0) says "a whole window": the quota may be raised meanwhile.
    const resetSeconds =
      freeAt > 0 ? Math.max(1, Math.ceil((freeAt - now) / 1000)) : remaining === 0 ? window.seconds : 0
    return { name: window.name, seconds: window.seconds, limit, used, remaining, resetSeconds }
  })
  return { allowed, windows, ...(allowed ? { taken: { subject, buckets: counts.map((count) => count.bucket) } } : {}) }
}
