/**
 * The Redis quota store: exact across every instance sharing one Redis, because each reservation is one
 * Lua script (sliding-window-scripts.ts) that Redis runs atomically: one round trip per request, plus one
 * more for the refund of a request that failed.
 *
 * Keys: `<prefix>rl:{ws:<id>}:<operation>:hour` and `…:day`. The hash tag `{ws:<id>}` puts all of one
 * workspace's keys in one Redis Cluster slot, so a script may touch both windows of an operation.
 */
import type { Redis } from 'ioredis'
import { closeRedisClient, RedisUnavailableError, withDeadline } from '../redis/redis-client.js'
import { RESERVE_SCRIPT, REFUND_SCRIPT } from './sliding-window-scripts.js'
import {
  LateReservation,
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

interface QuotaScripts {
  quotaReserve(...args: (string | number)[]): Promise<number[]>
  quotaRefund(...args: (string | number)[]): Promise<number>
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

  private async run(subject: QuotaSubject, limits: QuotaLimits, now: number, take: boolean, count = 1): Promise<QuotaDecision> {
    return (await this.runMany(subject, limits, now, take, count)).decision
  }

  private async runMany(subject: QuotaSubject, limits: QuotaLimits, now: number, take: boolean, count: number) {
    const args: (string | number)[] = [...this.keys(subject), Math.floor(now), take ? '1' : '0']
    for (const window of QUOTA_WINDOWS) {
      args.push(limitOf(limits, window), window.bucketSeconds * 1000, pastBuckets(window))
    }
    if (count !== 1) args.push(count)
    const read = (reply: number[]) => {
      const counts = QUOTA_WINDOWS.map((_, i) => ({
        bucket: Number(reply[1 + i * 3]),
        used: Number(reply[2 + i * 3]),
        freeAt: Number(reply[3 + i * 3]),
      }))
      return { decision: toDecision(subject, limits, now, reply[0] >= 1, counts), granted: Number(reply[0]) }
    }
    try {
      return read(await this.guard(this.scripts.quotaReserve(...args)))
    } catch (error) {
      if (take && error instanceof RedisUnavailableError && error.late) {
        throw new LateReservation(error, (error.late as Promise<number[]>).then(read))
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
    await this.guard(this.scripts.quotaRefund(...this.keys(taken.subject), ...taken.buckets))
  }

  async close(): Promise<void> {
    if (!this.options.ownsClient) return
    await closeRedisClient(this.redis)
  }
}
