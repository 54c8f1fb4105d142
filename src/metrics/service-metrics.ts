/**
 * The service's own metrics, read at scrape time from counters the code keeps anyway (visit answers, the
 * redirect cache, quotas, autofill, the visit buffer, the database pools, Redis): a scrape costs a few
 * dozen reads, and no visit or request pays anything for being measured. Counters here are prom-client
 * Counters set from those running totals on each scrape (they only grow while the process lives, as
 * Prometheus expects of a counter; a restart starts them at 0, which `rate()` handles).
 */
import type { FastifyInstance } from 'fastify'
import { Counter, Gauge, type Registry } from 'prom-client'
import type { VisitCounters } from '../plugins/redirects.js'

type Labels = Record<string, string>
type Sample = readonly [Labels, number]

/** Snake-case label values of the visit answers (the counters' own keys are camelCase). */
const ANSWER_LABELS: Record<keyof VisitCounters, string> = {
  redirect: 'redirect',
  masking: 'masking',
  interstitial: 'interstitial',
  crawler: 'crawler',
  password: 'password',
  wrongPassword: 'wrong_password',
  throttled: 'throttled',
  checksBusy: 'checks_busy',
  expired: 'expired',
  gone: 'gone',
  notFound: 'not_found',
}

function counterOf(registry: Registry, name: string, help: string, labelNames: string[], read: () => Sample[]): void {
  new Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset()
      for (const [labels, value] of read()) this.inc(labels, value)
    },
  })
}

function gaugeOf(registry: Registry, name: string, help: string, labelNames: string[], read: () => Sample[]): void {
  new Gauge({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset()
      for (const [labels, value] of read()) this.set(labels, value)
    },
  })
}

const single = (value: number): Sample[] => [[{}, value]]

/** Overload refusals and state, kept by src/plugins/overload.ts. */
export interface OverloadCounts {
  refused: { event_loop: number; database_pool: number }
  /** Whether each check holds now. */
  active: () => { event_loop: boolean; database_pool: boolean }
}

export function registerServiceMetrics(registry: Registry, app: FastifyInstance, overload: OverloadCounts): void {
  const { redirects, quotas, autofill } = app

  counterOf(registry, 'shortlinks_redirects_total', 'Visits to short links, by the answer they got', ['answer'], () =>
    Object.entries(redirects.counters).map(([key, value]) => [{ answer: ANSWER_LABELS[key as keyof VisitCounters] }, value]),
  )
  counterOf(
    registry,
    'shortlinks_redirect_cache_lookups_total',
    'Visits whose link the in-process cache knew (hit) or did not (miss: read from the database, or joined such a read)',
    ['result'],
    () => [[{ result: 'hit' }, redirects.cache.hits], [{ result: 'miss' }, redirects.cache.misses]],
  )
  counterOf(registry, 'shortlinks_redirect_cache_reads_total', 'Links the redirect cache read from the database', [], () =>
    single(redirects.cache.reads),
  )
  gaugeOf(registry, 'shortlinks_redirect_cache_entries', 'Links held by the redirect cache', [], () => single(redirects.cache.size))

  counterOf(
    registry,
    'shortlinks_rate_limit_rejections_total',
    'Requests refused with 429, by limit: the workspace quotas (create, update; bulk items count one each), the bad-token ' +
      'throttle and the password tries',
    ['limit'],
    () => [
      [{ limit: 'create' }, quotas.counts.rejected.create],
      [{ limit: 'update' }, quotas.counts.rejected.update],
      [{ limit: 'bad_token' }, app.badTokenThrottle.refusals],
      [{ limit: 'password' }, redirects.counters.throttled],
    ],
  )

  counterOf(
    registry,
    'shortlinks_autofill_outcomes_total',
    'Autofill runs by outcome (the X-Autofill values; autofill: false is not counted)',
    ['outcome'],
    () => (['filled', 'partial', 'failed', 'skipped'] as const).map((outcome) => [{ outcome }, autofill.counts[outcome]]),
  )
  counterOf(registry, 'shortlinks_autofill_fetches_total', 'Pages autofill fetched (not found in its cache)', [], () =>
    single(autofill.counts.fetches),
  )

  const recorder = app.visitRecorder
  if (recorder) {
    counterOf(
      registry,
      'shortlinks_visits_total',
      'Visits handed to the recorder, by what became of them: recorded (buffered), stored (written), dropped (buffer full)',
      ['state'],
      () => {
        const stats = recorder.stats()
        return [[{ state: 'recorded' }, stats.recorded], [{ state: 'stored' }, stats.stored], [{ state: 'dropped' }, stats.dropped]]
      },
    )
    gaugeOf(registry, 'shortlinks_visits_buffered', 'Visits waiting in the buffer to be written', [], () => single(recorder.stats().buffered))
    counterOf(registry, 'shortlinks_visit_batches_failed_total', 'Batches of visits the database refused (kept and tried again)', [], () =>
      single(recorder.stats().failedBatches),
    )
  }
  const rollup = app.visitRollup.counts
  counterOf(registry, 'shortlinks_visit_rollups_total', 'Rollups of the raw visits into the aggregates, by result', ['result'], () => [
    [{ result: 'done' }, rollup.runs],
    [{ result: 'failed' }, rollup.failures],
  ])
  counterOf(registry, 'shortlinks_visit_rollup_visits_total', 'Raw visits summed into the aggregates', [], () => single(rollup.visits))
  counterOf(registry, 'shortlinks_visit_rollup_seconds_total', 'Time spent rolling up', [], () => single(rollup.ms / 1000))

  const pools = () => app.db.pools()
  gaugeOf(registry, 'shortlinks_db_pool_connections', 'Open connections of each database pool, by state', ['pool', 'state'], () =>
    pools().flatMap((pool) => [
      [{ pool: pool.name, state: 'busy' }, pool.total - pool.idle],
      [{ pool: pool.name, state: 'idle' }, pool.idle],
    ]),
  )
  gaugeOf(registry, 'shortlinks_db_pool_max_connections', 'Most connections each database pool opens', ['pool'], () =>
    pools().map((pool) => [{ pool: pool.name }, pool.max]),
  )
  gaugeOf(registry, 'shortlinks_db_pool_waiting_queries', 'Queries waiting for a connection of each database pool', ['pool'], () =>
    pools().map((pool) => [{ pool: pool.name }, pool.waiting]),
  )

  if (app.redis) {
    const redis = app.redis
    gaugeOf(registry, 'shortlinks_redis_up', '1 while the Redis client is connected and ready, else 0', [], () =>
      single(redis.status === 'ready' ? 1 : 0),
    )
    counterOf(registry, 'shortlinks_redis_errors_total', 'Errors of the Redis connection (refused, reset, timed out)', [], () =>
      single(app.redisCounts.errors),
    )
    counterOf(registry, 'shortlinks_redis_reconnects_total', 'Reconnection attempts of the Redis client', [], () =>
      single(app.redisCounts.reconnects),
    )
    counterOf(
      registry,
      'shortlinks_redis_failures_total',
      'Redis calls that failed or missed their deadline, by use (each falls back as the README says)',
      ['use'],
      () => [
        [{ use: 'rate_limits' }, quotas.storeKind === 'redis' ? quotas.counts.storeFailures : 0],
        [{ use: 'autofill_cache' }, autofill.counts.cacheFailures],
        [{ use: 'password_tries' }, 'redisFailures' in redirects.throttle ? Number(redirects.throttle.redisFailures) : 0],
      ],
    )
  }

  counterOf(
    registry,
    'shortlinks_overload_rejections_total',
    'Requests refused with 503 by the overload protection, by reason',
    ['reason'],
    () => Object.entries(overload.refused).map(([reason, value]) => [{ reason }, value]),
  )
  gaugeOf(registry, 'shortlinks_overloaded', '1 while the overload protection refuses requests for this reason, else 0', ['reason'], () =>
    Object.entries(overload.active()).map(([reason, on]) => [{ reason }, on ? 1 : 0]),
  )
}
