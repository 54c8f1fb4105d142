/**
 * The in-process quota store, used without REDIS_URL: the sliding-window log of quota-store.ts in a Map. Exact
 * for one process (JavaScript runs each call to the end before the next), not shared between processes.
 */
import {
  QUOTA_WINDOWS,
  limitOf,
  requestsToFree,
  toDecision,
  type QuotaDecision,
  type QuotaLimits,
  type QuotaStore,
  type QuotaSubject,
  type QuotaTaken,
  type WindowCount,
} from './quota-store.js'

const HOUR_MS = QUOTA_WINDOWS[0].seconds * 1000
const DAY_MS = QUOTA_WINDOWS[1].seconds * 1000

interface Entry {
  at: number
  id: string
}

/** One subject's requests of the last day, oldest first. */
class RequestLog {
  entries: Entry[] = []

  /** Drops the requests that have stopped counting in the day. */
  prune(now: number): void {
    let stale = 0
    while (stale < this.entries.length && this.entries[stale].at <= now - DAY_MS) stale++
    if (stale > 0) this.entries.splice(0, stale)
  }

  /** Where the requests younger than an hour begin. */
  hourStart(now: number): number {
    let low = 0
    let high = this.entries.length
    while (low < high) {
      const middle = (low + high) >> 1
      if (this.entries[middle].at <= now - HOUR_MS) low = middle + 1
      else high = middle
    }
    return low
  }

  /**
   * Counts a request. Should the clock step back, it counts from the newest time instead (longer, never shorter),
   * which keeps the log in order.
   */
  take(now: number, id: string): void {
    const newest = this.entries.at(-1)?.at ?? -Infinity
    this.entries.push({ at: Math.max(now, newest), id })
  }

  refund(ids: Set<string>): void {
    this.entries = this.entries.filter((entry) => !ids.has(entry.id))
  }
}

/** A window's count and free-at (WindowCount.freeAt): the window counts `entries` from `start` on, oldest first. */
function windowCount(entries: Entry[], start: number, limit: number, windowMs: number): WindowCount {
  const used = entries.length - start
  if (used === 0) return { used, freeAt: 0 }
  const entry = entries[start + requestsToFree(used, limit) - 1]
  return { used, freeAt: entry ? entry.at + windowMs : -1 }
}

/** Every this many calls, the logs of every subject are pruned (see sweep). */
const SWEEP_EVERY_CALLS = 1024

export class MemoryQuotaStore implements QuotaStore {
  private readonly logs = new Map<string, RequestLog>()
  private nextId = 0
  private calls = 0

  /** Subjects with requests of the last day (the tests look). */
  get subjects(): number {
    return this.logs.size
  }

  /**
   * A log is pruned when its subject is asked about; a workspace that went quiet would keep its last day's entries
   * (up to a day's quota) for ever. Now and then every log is pruned, and the empty ones dropped.
   */
  private sweep(now: number): void {
    for (const [key, log] of this.logs) {
      log.prune(now)
      if (log.entries.length === 0) this.logs.delete(key)
    }
  }

  private logOf(subject: QuotaSubject): RequestLog {
    const key = `${subject.workspaceId}:${subject.operation}`
    let log = this.logs.get(key)
    if (!log) this.logs.set(key, (log = new RequestLog()))
    return log
  }

  private settle(subject: QuotaSubject, log: RequestLog): void {
    if (log.entries.length === 0) this.logs.delete(`${subject.workspaceId}:${subject.operation}`)
  }

  private decide(subject: QuotaSubject, limits: QuotaLimits, at: number, count: number): { decision: QuotaDecision; granted: number } {
    const now = Math.floor(at) // milliseconds, as the Redis store takes them
    if (++this.calls % SWEEP_EVERY_CALLS === 0) this.sweep(now)
    const log = this.logOf(subject)
    log.prune(now)
    const hourUsed = log.entries.length - log.hourStart(now)
    const granted = Math.max(0, Math.min(count, limits.hour - hourUsed, limits.day - log.entries.length))
    const ids = Array.from({ length: granted }, () => `m${++this.nextId}`)
    for (const id of ids) log.take(now, id)
    const starts = [log.hourStart(now), 0]
    const counts = QUOTA_WINDOWS.map((window, i) => windowCount(log.entries, starts[i], limitOf(limits, window), window.seconds * 1000))
    this.settle(subject, log)
    return { decision: toDecision(subject, limits, now, ids, counts), granted }
  }

  async reserve(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision> {
    return this.decide(subject, limits, now, 1).decision
  }

  async reserveMany(subject: QuotaSubject, limits: QuotaLimits, now: number, count: number) {
    return this.decide(subject, limits, now, count)
  }

  async peek(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision> {
    return this.decide(subject, limits, now, 0).decision
  }

  async refund(taken: QuotaTaken): Promise<void> {
    const log = this.logs.get(`${taken.subject.workspaceId}:${taken.subject.operation}`)
    if (!log) return
    log.refund(new Set(taken.ids))
    this.settle(taken.subject, log)
  }

  async close(): Promise<void> {
    this.logs.clear()
  }
}
