/**
 * The in-process quota store, used without REDIS_URL: the buckets of quota-store.ts in a Map. Exact for
 * one process (JavaScript runs each call to the end before the next), not shared between processes.
 */
import {
  QUOTA_WINDOWS,
  limitOf,
  pastBuckets,
  requestsToFree,
  toDecision,
  type QuotaDecision,
  type QuotaLimits,
  type QuotaStore,
  type QuotaSubject,
  type QuotaTaken,
  type QuotaWindow,
  type WindowCount,
} from './quota-store.js'

/** One window's buckets, bucket index → count, kept in ascending index order. */
class BucketWindow {
  private readonly buckets = new Map<number, number>()
  private newest = -Infinity
  total = 0

  constructor(readonly window: QuotaWindow) {}

  private get bucketMs() {
    return this.window.bucketSeconds * 1000
  }

  /** Drops the buckets that have stopped counting; answers the current bucket. */
  prune(now: number): number {
    const current = Math.floor(now / this.bucketMs)
    const oldestCounted = current - pastBuckets(this.window)
    for (const [index, count] of this.buckets) {
      if (index >= oldestCounted) break
      this.buckets.delete(index)
      this.total -= count
    }
    return current
  }

  /**
   * Counts one request. Should the clock step back, it counts in the newest bucket instead (longer, never
   * shorter), which also keeps the Map in ascending order.
   */
  take(current: number): number {
    const index = Math.max(current, this.newest)
    this.newest = index
    this.buckets.set(index, (this.buckets.get(index) ?? 0) + 1)
    this.total++
    return index
  }

  refund(index: number): void {
    const count = this.buckets.get(index)
    if (!count) return
    if (count === 1) this.buckets.delete(index)
    else this.buckets.set(index, count - 1)
    this.total--
  }

  /** See WindowCount.freeAt. */
  freeAt(limit: number): number {
    if (this.total === 0) return 0
    const need = requestsToFree(this.total, limit)
    let seen = 0
    for (const [index, count] of this.buckets) {
      seen += count
      if (seen >= need) return (index + pastBuckets(this.window) + 1) * this.bucketMs
    }
    return -1
  }
}

export class MemoryQuotaStore implements QuotaStore {
  private readonly subjects = new Map<string, BucketWindow[]>()

  private windowsOf(subject: QuotaSubject): BucketWindow[] {
    const key = `${subject.workspaceId}:${subject.operation}`
    let windows = this.subjects.get(key)
    if (!windows) {
      windows = QUOTA_WINDOWS.map((window) => new BucketWindow(window))
      this.subjects.set(key, windows)
    }
    return windows
  }

  private settle(subject: QuotaSubject, windows: BucketWindow[]): void {
    if (windows.every((window) => window.total === 0)) this.subjects.delete(`${subject.workspaceId}:${subject.operation}`)
  }

  private decide(subject: QuotaSubject, limits: QuotaLimits, now: number, take: boolean): QuotaDecision {
    const windows = this.windowsOf(subject)
    const current = windows.map((window) => window.prune(now))
    const allowed = take && windows.every((window) => window.total < limitOf(limits, window.window))
    const counts = windows.map(
      (window, i): WindowCount => {
        const bucket = allowed ? window.take(current[i]) : current[i]
        return { bucket, used: window.total, freeAt: window.freeAt(limitOf(limits, window.window)) }
      },
    )
    this.settle(subject, windows)
    return toDecision(subject, limits, now, allowed, counts)
  }

  async reserve(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision> {
    return this.decide(subject, limits, now, true)
  }

  async peek(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision> {
    return this.decide(subject, limits, now, false)
  }

  async refund(taken: QuotaTaken): Promise<void> {
    const windows = this.subjects.get(`${taken.subject.workspaceId}:${taken.subject.operation}`)
    if (!windows) return
    windows.forEach((window, i) => window.refund(taken.buckets[i]))
    this.settle(taken.subject, windows)
  }

  async close(): Promise<void> {
    this.subjects.clear()
  }
}
