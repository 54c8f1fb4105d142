/**
 * Issue 14, item 1: GET /metrics in the Prometheus text format. Requests of every kind (an API create, a
 * redirect, a 404 visit, a quota refusal, a failed autofill, recorded visits) show up in the scrape with the
 * right values; series are labelled by route pattern, never by a request's path; the token protection; and
 * /metrics answers on a short domain as itself, never as a link.
 */
import type { FastifyInstance } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import { Registry } from 'prom-client'
import t from 'tap'
import { freePort, quotaWorkspace } from '../rate-limits/quota-support.js'
import { acmeWorkspace, postPassword, SHORT_DOMAIN, visit } from '../redirects/visit-support.js'
import { until } from '../support/polling.js'
import { parseExposition, samplesOf, valueOf, type Exposition } from '../support/prometheus-text.js'
import { buildTestApp, client } from '../support/test-app.js'

const scrape = async (app: FastifyInstance, headers: Record<string, string> = {}): Promise<Exposition> => {
  const response = await app.inject({ url: '/metrics', headers })
  if (response.statusCode !== 200) throw new Error(`GET /metrics: ${response.statusCode} ${response.body}`)
  return parseExposition(response.body)
}

const duration = (method: string, route: string, status: number) => ({ method, route, status_code: String(status) })

t.test('what requests, visits, quotas and autofill did shows in the scrape', async (t) => {
  const test = await buildTestApp(t)
  const { app, database } = test
  const { api, link } = await acmeWorkspace(test)

  const created = await link({ id: 'promo', url: 'https://example.com/promo' })
  t.equal(created.id, 'promo')
  t.equal((await visit(app, '/promo')).statusCode, 302)
  t.equal((await visit(app, '/promo')).statusCode, 302)
  t.equal((await visit(app, '/no-such-link')).statusCode, 404)
  // Autofill of a page that cannot be fetched (the test resolver knows no such host): failed, link stored.
  const autofilled = await api.create({ domain: SHORT_DOMAIN, url: 'https://unknown-host.example/' })
  t.equal(autofilled.statusCode, 201)
  t.equal(autofilled.headers['x-autofill'], 'failed')
  // A quota of one create an hour: the second is refused; a create of a taken slug is still its 409 (a full quota
  // must not hide it), which is no rejection by the quota.
  const limited = await quotaWorkspace(test.prisma, 'metrics-quota', { hour: 1 })
  const quotaApi = client(app, limited.token)
  t.equal((await quotaApi.create({ url: 'https://example.com/a', id: 'taken' }, { autofill: false })).statusCode, 201)
  t.equal((await quotaApi.create({ url: 'https://example.com/a', id: 'taken' }, { autofill: false })).statusCode, 409)
  t.equal((await quotaApi.create({ url: 'https://example.com/b' }, { autofill: false })).statusCode, 429)
  // The visits are handed on after their answers, then written in batches.
  await until(() => app.visitRecorder!.stats().recorded >= 2, 'the visits to be recorded')
  await app.visitRecorder!.flush()

  const response = await app.inject({ url: '/metrics' })
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  const metrics = parseExposition(response.body)

  // Requests, by route pattern and status; the _count is the number of requests.
  const count = 'http_request_duration_seconds_count'
  t.equal(metrics.types.get('http_request_duration_seconds'), 'histogram')
  t.equal(valueOf(metrics, count, duration('POST', '/v1/links/create', 201)), 3, 'three creates answered 201')
  t.equal(valueOf(metrics, count, duration('POST', '/v1/links/create', 429)), 1)
  t.equal(valueOf(metrics, count, duration('POST', '/v1/links/create', 409)), 1)
  t.equal(valueOf(metrics, count, duration('GET', '/:slug', 302)), 2)
  t.equal(valueOf(metrics, count, duration('GET', '/:slug', 404)), 1)
  t.same(samplesOf(metrics, count, { route: '/metrics' }), [], '/metrics itself is not timed')
  t.same(
    metrics.samples.filter((sample) => /promo|no-such-link/.test(sample.labels.route ?? '')),
    [],
    'no series is labelled with a slug',
  )
  // Each series' buckets grow, end with +Inf at the count, and the sum is a plausible duration.
  const redirects = samplesOf(metrics, 'http_request_duration_seconds_bucket', duration('GET', '/:slug', 302))
  t.equal(redirects.at(-1)?.labels.le, '+Inf')
  t.equal(redirects.at(-1)?.value, 2)
  t.ok(redirects.every((bucket, i) => i === 0 || bucket.value >= redirects[i - 1].value), 'cumulative buckets')
  const sum = valueOf(metrics, 'http_request_duration_seconds_sum', duration('GET', '/:slug', 302))!
  t.ok(sum > 0 && sum < 10, `the two redirects took ${sum} s`)

  // Visits by answer, the redirect cache, quotas, autofill, recorded visits.
  t.equal(metrics.types.get('shortlinks_redirects_total'), 'counter')
  t.equal(valueOf(metrics, 'shortlinks_redirects_total', { answer: 'redirect' }), 2)
  t.equal(valueOf(metrics, 'shortlinks_redirects_total', { answer: 'not_found' }), 1)
  t.equal(valueOf(metrics, 'shortlinks_redirects_total', { answer: 'masking' }), 0)
  t.equal(valueOf(metrics, 'shortlinks_redirect_cache_lookups_total', { result: 'hit' }), 1, 'the second visit of promo')
  t.equal(valueOf(metrics, 'shortlinks_redirect_cache_lookups_total', { result: 'miss' }), 2, 'the first visit, and the unknown slug')
  t.equal(valueOf(metrics, 'shortlinks_redirect_cache_reads_total'), 2)
  t.equal(valueOf(metrics, 'shortlinks_redirect_cache_entries'), 1)
  t.equal(valueOf(metrics, 'shortlinks_rate_limit_rejections_total', { limit: 'create' }), 1, 'the 429, not the 409')
  t.equal(valueOf(metrics, 'shortlinks_rate_limit_rejections_total', { limit: 'update' }), 0)
  t.equal(valueOf(metrics, 'shortlinks_autofill_outcomes_total', { outcome: 'failed' }), 1)
  t.equal(valueOf(metrics, 'shortlinks_autofill_outcomes_total', { outcome: 'filled' }), 0)
  t.equal(valueOf(metrics, 'shortlinks_autofill_fetches_total'), 1)
  t.equal(valueOf(metrics, 'shortlinks_visits_total', { state: 'recorded' }), 2)
  t.equal(valueOf(metrics, 'shortlinks_visits_total', { state: 'stored' }), 2)
  t.equal(valueOf(metrics, 'shortlinks_visits_total', { state: 'dropped' }), 0)
  t.equal(valueOf(metrics, 'shortlinks_visits_buffered'), 0)
  const [{ stored }] = await database.sql<{ stored: number }>('SELECT count(*)::int AS stored FROM analytics."Visit"')
  t.equal(stored, 2, 'and the database holds them')

  // The pools: the main and the visitor pool on PostgreSQL; the embedded database is one connection.
  if (database.kind === 'postgres') {
    t.equal(valueOf(metrics, 'shortlinks_db_pool_max_connections', { pool: 'main' }), 10)
    t.equal(valueOf(metrics, 'shortlinks_db_pool_max_connections', { pool: 'visitor' }), 2)
    t.equal(valueOf(metrics, 'shortlinks_db_pool_waiting_queries', { pool: 'main' }), 0)
    const open = samplesOf(metrics, 'shortlinks_db_pool_connections', { pool: 'main' }).reduce((total, s) => total + s.value, 0)
    t.ok(open >= 1 && open <= 10, `${open} connections open in the main pool`)
  } else {
    t.equal(samplesOf(metrics, 'shortlinks_db_pool_max_connections').length, 1)
    t.equal(valueOf(metrics, 'shortlinks_db_pool_max_connections', { pool: 'main' }), 1)
    t.equal(valueOf(metrics, 'shortlinks_db_pool_waiting_queries', { pool: 'main' }), 0)
  }
  t.equal(valueOf(metrics, 'shortlinks_overload_rejections_total', { reason: 'event_loop' }), 0)
  t.equal(valueOf(metrics, 'shortlinks_overloaded', { reason: 'database_pool' }), 0)
  // Process metrics (prom-client's defaults).
  t.ok(valueOf(metrics, 'process_cpu_user_seconds_total')! > 0)
  t.ok(valueOf(metrics, 'nodejs_heap_size_used_bytes')! > 0)
})

t.test('password visits count one answer each: the form, a wrong try, a throttled try', async (t) => {
  const test = await buildTestApp(t)
  const { link } = await acmeWorkspace(test)
  await link({ id: 'locked', url: 'https://example.com/secret', passwordProtect: { enable: true, password: 'open sesame' } })
  const answers = async () => {
    const metrics = await scrape(test.app)
    return Object.fromEntries(['password', 'wrong_password', 'throttled'].map((answer) => [answer, valueOf(metrics, 'shortlinks_redirects_total', { answer })]))
  }
  t.equal((await visit(test.app, '/locked')).statusCode, 200)
  t.same(await answers(), { password: 1, wrong_password: 0, throttled: 0 }, 'the form')
  t.equal((await postPassword(test.app, '/locked', '')).statusCode, 401)
  t.same(await answers(), { password: 2, wrong_password: 0, throttled: 0 }, 'no password sent: the form again')
  for (let i = 0; i < 11; i++) await postPassword(test.app, '/locked', 'wrong')
  t.same(await answers(), { password: 2, wrong_password: 10, throttled: 1 }, 'ten wrong tries, then the limit: one answer each')
})

t.test('a slug cannot shadow /metrics: reserved, and answered as metrics on a short domain', async (t) => {
  const test = await buildTestApp(t)
  const { api } = await acmeWorkspace(test)
  const refused = await api.create({ domain: SHORT_DOMAIN, id: 'metrics', url: 'https://example.com/' }, { autofill: false })
  t.equal(refused.statusCode, 400)
  t.equal(refused.json().code, 'slug_reserved')
  const onShortDomain = await visit(test.app, '/metrics')
  t.equal(onShortDomain.statusCode, 200)
  t.match(onShortDomain.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  t.ok(parseExposition(onShortDomain.body).types.has('shortlinks_redirects_total'))
})

t.test('METRICS_TOKEN: only Authorization: Bearer <token> reads the metrics', async (t) => {
  const token = 'a-metrics-token-of-the-scraper'
  const { app } = await buildTestApp(t, { env: { METRICS_TOKEN: token } })
  for (const authorization of [undefined, `Bearer ${token}x`, token, 'Bearer ', `Basic ${token}`, `Bearer ${token} ${token}`, `Bearer${token}`]) {
    const response = await app.inject({ url: '/metrics', headers: authorization === undefined ? {} : { authorization } })
    t.equal(response.statusCode, 401, `${authorization}: 401`)
    t.match(response.headers['content-type'], /^application\/problem\+json/)
    t.equal(response.headers['www-authenticate'], 'Bearer realm="metrics"')
    t.match(response.json(), { status: 401, code: 'unauthorized', detail: /METRICS_TOKEN/ })
    t.notMatch(response.body, token)
  }
  // The scheme's name is case-insensitive, and any whitespace may separate it from the token (RFC 9110 11.1).
  for (const authorization of [`bearer ${token}`, `BEARER  ${token}`, ` Bearer\t${token} `]) {
    t.equal((await app.inject({ url: '/metrics', headers: { authorization } })).statusCode, 200, authorization)
  }
  const metrics = await scrape(app, { authorization: `Bearer ${token}` })
  t.ok(metrics.types.has('http_request_duration_seconds'))
  t.equal(valueOf(metrics, 'http_request_duration_seconds_count', duration('GET', 'unmatched', 404)), undefined)
  // Without the variable no token is needed (the other tests here).
})

t.test('a Redis that cannot be reached: its errors and reconnections are counted, and it is reported down', async (t) => {
  const port = await freePort()
  const { app } = await buildTestApp(t, { env: { REDIS_URL: `redis://127.0.0.1:${port}` } })
  let metrics = await scrape(app)
  for (let i = 0; !(valueOf(metrics, 'shortlinks_redis_reconnects_total')! >= 1); i++) {
    if (i > 100) throw new Error('no reconnection attempt counted')
    await sleep(50)
    metrics = await scrape(app)
  }
  t.ok(valueOf(metrics, 'shortlinks_redis_errors_total')! >= 1, 'connection errors counted')
  t.equal(valueOf(metrics, 'shortlinks_redis_up'), 0)
})

t.test('requests no route matches are counted under the route `unmatched`', async (t) => {
  const { app } = await buildTestApp(t)
  t.equal((await app.inject({ method: 'PATCH', url: '/some/where/else' })).statusCode, 404)
  t.equal((await app.inject({ method: 'PATCH', url: '/another/path' })).statusCode, 404)
  const metrics = await scrape(app)
  t.equal(valueOf(metrics, 'http_request_duration_seconds_count', duration('PATCH', 'unmatched', 404)), 2)
})

t.test('scrapes under way at once share one rendering; the next renders afresh', async (t) => {
  const { app } = await buildTestApp(t)
  let renders = 0
  const merged = Registry.prototype.metrics
  // Counted where every rendering goes: the merged registry's metrics().
  Registry.prototype.metrics = function (this: Registry) {
    renders++
    return merged.call(this)
  }
  t.teardown(() => {
    Registry.prototype.metrics = merged
  })
  const answers = await Promise.all(Array.from({ length: 20 }, () => app.inject('/metrics')))
  t.ok(answers.every((answer) => answer.statusCode === 200))
  t.equal(new Set(answers.map((answer) => answer.body)).size, 1, 'the same text for all')
  t.ok(renders < 5, `${renders} renderings for 20 scrapes at once`)
  const before = renders
  await app.inject('/metrics')
  t.equal(renders, before + 1, 'a scrape after them renders again (its counts are fresh)')
})
