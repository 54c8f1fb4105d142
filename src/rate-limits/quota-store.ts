/**
 * Per-workspace quotas (contract section 8): what a store counts and what it answers. Both stores
 * (redis-store.ts, memory-store.ts) count the same way, as a sliding-window log: each request taken is
 * kept with the moment it was taken and an id of its own, and counts in a window while it is younger than the
 * window, so at any moment the hour counts exactly the last 3,600 s and the day the last 86,400 s. A refund
 * takes a request's id out of the log: giving back the same id twice gives it back once. Memory per workspace and
 * operation is one entry per request of the last day: at most the day's quota.
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
  { name: 'hour', seconds: 3600 },
  { name: 'day', seconds: 86_400 },
] as const

export type QuotaWindow = (typeof QUOTA_WINDOWS)[number]

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
    /**
     * Every slot the reservation may have taken: when `late` fails (its connection closed while Redis was frozen),
     * Redis may still run the script it had received, and these are what to give back.
     */
    readonly possible: QuotaTaken,
  ) {
    super(cause.message)
    // Whoever holds the reservation looks at `late` only once its request is answered, and Redis may fail it
    // before that (the connection closed on its socket timeout): a rejection nobody handled yet would end the
    // process (close-with-grace takes it as fatal). Marked handled here; a later `then` still sees it.
    late.catch(() => {})
  }
}

/** What a reservation took: the ids of its requests in the log (a bulk create takes several). */
export interface QuotaTaken {
  subject: QuotaSubject
  ids: string[]
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
  /** Gives back what a reservation took: its ids leave the log (an id given back already is left alone). */
  refund(taken: QuotaTaken): Promise<void>
  close(): Promise<void>
}

/** What a store computes per window: the count, and when slots free (see freeAt). */
export interface WindowCount {
  used: number
  /**
   * When (ms, the service clock) enough counted requests have stopped counting to leave a slot free (or, with
   * room already, when the oldest stops counting): that request's time plus the window. 0 when nothing is
   * counted, -1 when no expiry frees a slot (a quota of 0).
   */
  freeAt: number
}

export const limitOf = (limits: QuotaLimits, window: QuotaWindow) => limits[window.name]

/** How many of the oldest counted requests must stop counting before one more fits. */
export const requestsToFree = (used: number, limit: number) => Math.max(1, used - limit + 1)

/** `ids`: the requests this reservation took (none when refused). */
export function toDecision(subject: QuotaSubject, limits: QuotaLimits, now: number, ids: string[], counts: WindowCount[]): QuotaDecision {
  const windows = QUOTA_WINDOWS.map((window, i): WindowUsage => {
    const limit = limitOf(limits, window)
    const { used, freeAt } = counts[i]
    const remaining = Math.max(0, limit - used)
    // A full window that no expiry frees (a quota of 0) says "a whole window": the quota may be raised meanwhile.
    // Never more than the window: a clock that stepped back, or one behind the instance that took the counted
    // requests (they share the log in Redis, each with its own clock), would otherwise say longer.
    const resetSeconds =
      freeAt > 0 ? Math.min(window.seconds, Math.max(1, Math.ceil((freeAt - now) / 1000))) : remaining === 0 ? window.seconds : 0
    return { name: window.name, seconds: window.seconds, limit, used, remaining, resetSeconds }
  })
  return { allowed: ids.length > 0, windows, ...(ids.length > 0 ? { taken: { subject, ids } } : {}) }
}
