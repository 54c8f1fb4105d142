/**
 * The Redis quota store: exact across every instance sharing one Redis, because each reservation is one
 * Lua script (sliding-window-log-scripts.ts) that Redis runs atomically: one round trip per request, plus one
 * more for the refund of a request that failed.
 *
 * Key: `<prefix>rl:{ws:<id>}:<operation>`, the log of both windows. The hash tag `{ws:<id>}` puts all of one
 * workspace's keys in one Redis Cluster slot.
 */
import type { Redis } from 'ioredis'
import { randomBytes } from 'node:crypto'
import { closeRedisClient, RedisUnavailableError, withDeadline } from '../redis/redis-client.js'
import { RESERVE_SCRIPT, REFUND_SCRIPT } from './sliding-window-log-scripts.js'
import {
  LateReservation,
  QUOTA_WINDOWS,
  limitOf,
  toDecision,
  type QuotaDecision,
  type QuotaLimits,
  type QuotaStore,
  type QuotaSubject,
  type QuotaTaken,
} from './quota-store.js'

interface QuotaScripts {
  quotaReserve(...args: (string | number)[]): Promise<number[]>
  quotaRefund(...args: (string | number)[]): Promise<number>
}

/** Names this process's requests apart from every other instance's; `calls` numbers them within it (every store). */
const PROCESS_ID = randomBytes(9).toString('base64url')
let calls = 0

export class RedisQuotaStore implements QuotaStore {
  private readonly scripts: QuotaScripts

  /**
   * `ownsClient`: close the client with the store. `callersClock`: log requests at the `now` each call gives (tests
   * drive it) rather than at Redis's time.
   */
  constructor(
    readonly redis: Redis,
    private readonly options: { keyPrefix?: string; ownsClient?: boolean; deadlineMs?: number; callersClock?: boolean } = {},
  ) {
    if (!('quotaReserve' in redis)) {
      redis.defineCommand('quotaReserve', { numberOfKeys: 1, lua: RESERVE_SCRIPT })
      redis.defineCommand('quotaRefund', { numberOfKeys: 1, lua: REFUND_SCRIPT })
    }
    this.scripts = redis as unknown as QuotaScripts
  }

  /** The log of one subject. */
  key(subject: QuotaSubject): string {
    return `${this.options.keyPrefix ?? ''}rl:{ws:${subject.workspaceId}}:${subject.operation}`
  }

  private async run(subject: QuotaSubject, limits: QuotaLimits, now: number, take: boolean, count = 1): Promise<QuotaDecision> {
    return (await this.runMany(subject, limits, now, take, count)).decision
  }

  private async runMany(subject: QuotaSubject, limits: QuotaLimits, now: number, take: boolean, count: number) {
    // The ids of this call's requests: this process's random name and the call's number, numbered by the script
    // (a random id per call cost about 8 µs of CPU, a tenth of the call).
    const prefix = `${PROCESS_ID}.${(calls++).toString(36)}`
    const args: (string | number)[] = [this.key(subject), this.options.callersClock ? Math.floor(now) : '', take ? '1' : '0']
    for (const window of QUOTA_WINDOWS) args.push(limitOf(limits, window), window.seconds * 1000)
    args.push(count, prefix)
    const read = (reply: number[]) => {
      const granted = Number(reply[0])
      const counts = QUOTA_WINDOWS.map((_, i) => ({ used: Number(reply[1 + i * 2]), freeAt: Number(reply[2 + i * 2]) }))
      const ids = Array.from({ length: granted }, (_, i) => `${prefix}:${i + 1}`)
      // The waits are counted from the time the script used, Redis's own unless the caller's was given.
      return { decision: toDecision(subject, limits, Number(reply[1 + QUOTA_WINDOWS.length * 2]), ids, counts), granted }
    }
    try {
      return read(await this.guard(this.scripts.quotaReserve(...args)))
    } catch (error) {
      if (take && error instanceof RedisUnavailableError && error.late) {
        const possible = { subject, ids: Array.from({ length: count }, (_, i) => `${prefix}:${i + 1}`) }
        throw new LateReservation(error, (error.late as Promise<number[]>).then(read), possible)
      }
      throw error
    }
  }

  reserveMany(subject: QuotaSubject, limits: QuotaLimits, now: number, count: number) {
    return this.runMany(subject, limits, now, true, count)
  }

  private guard<T>(promise: Promise<T>): Promise<T> {
    return withDeadline(promise, this.options.deadlineMs)
  }

  reserve(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision> {
    return this.run(subject, limits, now, true)
  }

  peek(subject: QuotaSubject, limits: QuotaLimits, now: number): Promise<QuotaDecision> {
    return this.run(subject, limits, now, false)
  }

  async refund(taken: QuotaTaken): Promise<void> {
    if (taken.ids.length === 0) return
    await this.guard(this.scripts.quotaRefund(this.key(taken.subject), ...taken.ids))
  }

  async close(): Promise<void> {
    if (!this.options.ownsClient) return
    await closeRedisClient(this.redis)
  }
}
