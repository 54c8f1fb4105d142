/**
 * `app.visits`: where the visitor routes hand each visit (src/redirects/visits.ts). The service's recorder
 * buffers them and writes batches of raw visits (src/analytics/visit-recorder.ts), which the rollup sums into
 * the hourly and daily aggregates every minute (src/analytics/visit-rollup.ts). This plugin also keeps the monthly
 * partitions ahead of time and drops those past VISIT_RETENTION_DAYS, at start and every six hours, and writes
 * what is buffered when the app closes (before the database closes: onClose hooks run in reverse order).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'
import { waitAtMost, type PrismaClient } from '../db/database.js'
import { VISIT_WRITES_BY_MS } from './graceful-close.js'
import { createPartitionsAhead, dropExpired } from '../analytics/partitions.js'
import { BufferedVisitRecorder, type VisitBufferOptions } from '../analytics/visit-recorder.js'
import { storeVisitRows } from '../analytics/visit-store.js'
import { VisitorKeys } from '../analytics/visitor-key.js'
import { ROLLUP_GRACE_MS, rollUpVisits, type RollupOptions, type RollupResult } from '../analytics/visit-rollup.js'
import type { VisitRecorder } from '../redirects/visits.js'

const MAINTENANCE_EVERY_MS = 6 * 3600_000
/**
 * How often the raw visits are summed into the aggregates. Longer means fewer aggregate writes (a link's rows
 * are written once per rollup) and more raw visits for the stats to read past "rolledUpTo".
 */
const ROLLUP_EVERY_MS = 60_000
/**
 * How long closing waits for the buffered visits to be written when the database fails them (it is down); then what
 * is left is logged as lost. A write that waits rather than fails (for a lock: another instance's rollup holds the
 * rollup row for seconds at a busy minute) is waited for until VISIT_WRITES_BY_MS after the close began.
 */
export const VISIT_FLUSH_ON_CLOSE_MS = 3000
/**
 * The least the buffered visits are given, should the close reach them late: the flush ends by VISIT_WRITES_BY_MS or
 * a second after it starts, whichever is later. (It used to be 3 s at least, which after requests cut at 6.25 s
 * took the close, with the rollup's wait, to within a tenth of a second of the 10 s after which it is killed.)
 */
const VISIT_FLUSH_AT_LEAST_MS = 1000
/** How long closing waits for a rollup under way before the database's close ends it. */
const ROLLUP_CLOSE_WAIT_MS = 500
/**
 * How far this machine's clock may be from the database's before this instance stops dropping expired visits and
 * rolling up: what those delete and the rollup's mark are shared by every instance, and a clock days ahead would
 * drop this month's visits, its aggregates and today's unique visitors. Clocks kept by NTP are milliseconds apart.
 */
const MAX_CLOCK_SKEW_MS = 5 * 60_000

export interface VisitPluginOptions {
  /** Another recorder instead of the database one (tests). */
  recorder?: VisitRecorder
  buffer?: VisitBufferOptions
  /** Put after REDIS_KEY_PREFIX before Redis keys (tests use one per run). */
  keyPrefix?: string
  /** The clock of partition maintenance and rollups (tests). */
  now?: () => number
  /** The machine's clock, which must agree with the database's for retention and rollups to run (tests skew it). */
  machineClock?: () => number
  /** How often the rollup runs (default a minute), and its grace and steps (tests, benchmarks). */
  rollup?: RollupOptions & { everyMs?: number }
}

declare module 'fastify' {
  interface FastifyInstance {
    visits: VisitRecorder
    /** The database recorder, when it is the one in use (its counts: recorded, stored, dropped…). */
    visitRecorder: BufferedVisitRecorder | null
    /**
     * Sums the raw visits before `upTo` (default: a few seconds ago) into the aggregates now, as the timer does
     * every minute; its counts so far.
     */
    visitRollup: { run(upTo?: Date): Promise<RollupResult>; counts: { runs: number; visits: number; failures: number; ms: number } }
  }
}

export default fp(
  async function visits(app: FastifyInstance, options: { config: Config } & VisitPluginOptions) {
    if (options.recorder) {
      app.decorate('visits', options.recorder)
      app.decorate('visitRecorder', null)
      app.decorate('visitRollup', { run: async () => ({ visits: 0, rolledUpTo: null }), counts: { runs: 0, visits: 0, failures: 0, ms: 0 } })
      return
    }
    const prisma = app.db.prisma
    const now = options.now ?? Date.now
    const machineClock = options.machineClock ?? Date.now
    let skewed = false
    /** Whether the machine's clock agrees with the database's; a warning when it stops agreeing, a note when it agrees again. */
    const clockAgrees = async (): Promise<boolean> => {
      const skewMs = await clockSkewMs(prisma, machineClock)
      const agrees = Math.abs(skewMs) <= MAX_CLOCK_SKEW_MS
      if (!agrees && !skewed) {
        app.log.warn(
          { skewMs: Math.round(skewMs) },
          "visits: this machine's clock is over 5 minutes off the database's; this instance neither drops expired visits nor rolls up until they agree",
        )
      }
      if (agrees && skewed) app.log.info("visits: this machine's clock agrees with the database's again")
      skewed = !agrees
      return agrees
    }
    let warned = false
    const keys = new VisitorKeys({
      redis: app.redis,
      keyPrefix: options.config.redisKeyPrefix + (options.keyPrefix ?? ''),
      onFallback: (error) => {
        if (!warned) app.log.warn({ err: error }, 'visits: Redis did not give the day\'s visitor key; this instance goes on with the key it has, or one of its own')
        warned = true
      },
    })
    const recorder = new BufferedVisitRecorder((batch, batchId) => storeVisitRows(app.db, batch, batchId), keys, app.log, options.buffer)
    app.decorate('visits', recorder)
    app.decorate('visitRecorder', recorder)

    // One rollup at a time in this process; the rollup row makes instances take turns, and an instance that
    // finds less than half an interval due leaves it (another has just rolled up).
    const rollupEveryMs = options.rollup?.everyMs ?? ROLLUP_EVERY_MS
    const rollupCounts = { runs: 0, visits: 0, failures: 0, ms: 0 }
    let rolling: Promise<RollupResult> | null = null
    const rollUp = (upTo = new Date(now() - ROLLUP_GRACE_MS), minSpanMs = 0) =>
      (rolling ??= (async () => {
        const started = performance.now()
        try {
          const result = await rollUpVisits(app.db, upTo, { minSpanMs, ...options.rollup })
          rollupCounts.runs++
          rollupCounts.visits += result.visits
          return result
        } finally {
          rollupCounts.ms += performance.now() - started
          rolling = null
        }
      })())
    app.decorate('visitRollup', { run: (upTo?: Date) => rollUp(upTo), counts: rollupCounts })
    const rollUpQuietly = async () => {
      try {
        if (await clockAgrees()) await rollUp(undefined, rollupEveryMs / 2)
      } catch (error) {
        rollupCounts.failures++
        app.log.warn({ err: error }, 'visits: summing the raw visits into the aggregates failed; tried again at the next minute')
      }
    }

    const maintain = async () => {
      const at = new Date(now())
      await createPartitionsAhead(prisma, at).catch((error) =>
        app.log.warn({ err: error }, 'visits: creating the partitions ahead failed; tried again later'),
      )
      try {
        if (!(await clockAgrees())) return
        const { dropped, deferred } = await dropExpired(prisma, at, options.config.visitRetentionDays)
        if (dropped.length > 0) app.log.info({ dropped }, 'visits: partitions past the retention dropped')
        if (deferred.length > 0) app.log.info({ deferred }, 'visits: partitions past the retention kept for now (a long read held them); tried again later')
      } catch (error) {
        app.log.warn({ err: error }, 'visits: dropping what is past the retention failed; tried again later')
      }
    }
    const timers: NodeJS.Timeout[] = []
    app.addHook('onReady', async () => {
      await maintain()
      timers.push(setInterval(() => void maintain(), MAINTENANCE_EVERY_MS).unref())
      timers.push(setInterval(() => void rollUpQuietly(), rollupEveryMs).unref())
      recorder.start()
    })
    app.addHook('onClose', async () => {
      for (const timer of timers) clearInterval(timer)
      // Within the time the close has left (src/plugins/graceful-close.ts, DRAIN).
      const left = (app.closingSince ?? Date.now()) + VISIT_WRITES_BY_MS - Date.now()
      await recorder.close(Math.max(left, VISIT_FLUSH_AT_LEAST_MS), VISIT_FLUSH_ON_CLOSE_MS)
      // What this instance wrote is summed by the next rollup of any instance. One under way finishes first,
      // unless it takes longer than the close has left: closing the database then ends its connection, which
      // rolls it back (the next rollup sums its span again).
      if (rolling) await waitAtMost(rolling, ROLLUP_CLOSE_WAIT_MS)
    })
  },
  { name: 'visits', dependencies: ['database', 'redis'] },
)

/** How far the database's clock is ahead of the machine's (negative: behind), against the middle of the round trip. */
async function clockSkewMs(prisma: PrismaClient, machineClock: () => number): Promise<number> {
  const before = machineClock()
  const [{ at }] = await prisma.$queryRaw<{ at: Date }[]>`SELECT clock_timestamp() AS "at"`
  return new Date(at).getTime() - (before + machineClock()) / 2
}
