/**
 * Issue 14, item 2: overload protection. While the event loop is saturated every request but the probes and
 * /metrics is answered 503 `unavailable` with Retry-After at once, /readyz says why (503) and /healthz stays
 * 200; while the main database pool has too many queries waiting, the API is refused at once instead of
 * waiting for a connection (visitors, who need no main-pool connection, are not); both recover by themselves.
 */
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import t, { type Test } from 'tap'
import { RETRY_AFTER_UNAVAILABLE_SECONDS } from '../../src/errors/app-error.js'
import { acmeWorkspace, visit } from '../redirects/visit-support.js'
import { parseExposition, valueOf } from '../support/prometheus-text.js'
import { until } from '../support/polling.js'
import { loadConfig } from '../../src/config/config.js'
import { buildTestApp } from '../support/test-app.js'

/** Sends `request` until it is answered 503 (the pressure is sampled, so a request may slip in between). */
async function refusedOnce(request: () => Promise<LightMyRequestResponse>, what: string): Promise<LightMyRequestResponse> {
  let last: LightMyRequestResponse | undefined
  await until(async () => (last = await request()).statusCode === 503, `a 503 for ${what}`)
  return last!
}

function assertOverloaded(t: Test, response: LightMyRequestResponse, what: RegExp) {
  t.equal(response.statusCode, 503)
  t.match(response.headers['content-type'], /^application\/problem\+json/)
  t.equal(response.headers['retry-after'], String(RETRY_AFTER_UNAVAILABLE_SECONDS))
  t.match(response.json(), { type: 'about:blank', status: 503, code: 'unavailable', detail: what })
}

/** Holds the event loop in slices of `sliceMs`, letting other work run between them, until stopped. */
function saturateEventLoop(sliceMs: number): () => void {
  let running = true
  const hold = () => {
    if (!running) return
    const end = performance.now() + sliceMs
    while (performance.now() < end) {
      // busy: the loop is held
    }
    setTimeout(hold, 1)
  }
  setTimeout(hold, 1)
  return () => {
    running = false
  }
}

const metricsOf = async (app: FastifyInstance) => parseExposition((await app.inject('/metrics')).body)

t.test('a saturated event loop: 503 at once for the API and visitors; /readyz 503, /healthz 200; then recovery', async (t) => {
  // Slices of 700 ms against a limit of 300 ms, sampled every second: clear of what a loaded machine (and the
  // embedded database, which runs on the loop) does to the loop by itself, and each sample sees a slice.
  const lines: { level: number; msg: string; res?: { statusCode: number } }[] = []
  const test = await buildTestApp(t, {
    env: { OVERLOAD_EVENT_LOOP_DELAY_MS: '300' },
    overload: { sampleIntervalMs: 1000 },
    logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } },
  })
  const { app } = test
  // Set up while start-up is not judged yet (src/plugins/overload.ts).
  const { token, link } = await acmeWorkspace(test)
  await link({ id: 'busy', url: 'https://example.com/busy' })
  const list = () => app.inject({ url: '/v1/links', headers: { 'api-authorization': token } })
  await until(async () => (await list()).statusCode === 200, 'the API to answer before the test')

  const stop = saturateEventLoop(700)
  t.teardown(stop)
  await until(() => app.overload.reason() === 'event_loop', 'the event loop to count as saturated')
  assertOverloaded(t, await refusedOnce(list, 'the API'), /overloaded \(its event loop is saturated\)/)
  assertOverloaded(t, await refusedOnce(() => visit(app, '/busy'), 'a visit'), /event loop/)
  const ready = await refusedOnce(() => app.inject('/readyz'), '/readyz')
  t.equal(ready.headers['retry-after'], String(RETRY_AFTER_UNAVAILABLE_SECONDS))
  t.same(ready.json(), { status: 'overloaded: event loop saturated' })
  for (let i = 0; i < 5; i++) t.equal((await app.inject('/healthz')).statusCode, 200, '/healthz is never refused for load')
  const during = await metricsOf(app)
  t.ok(valueOf(during, 'shortlinks_overload_rejections_total', { reason: 'event_loop' })! >= 2, '/metrics answers, and counts the refusals')
  t.equal(valueOf(during, 'shortlinks_overloaded', { reason: 'event_loop' }), 1)

  stop()
  const refusedLines = lines.filter((line) => line.res?.statusCode === 503 && line.msg === 'request completed')
  t.same(refusedLines, [], 'no log line per refused request')
  t.equal(lines.filter((line) => /^overloaded: requests are refused/.test(line.msg)).length, 1, 'one warning for them all')
  // Polled: the machine's own load may still hold the loop for a moment.
  await until(async () => (await list()).statusCode === 200, 'the API to answer again')
  await until(async () => (await visit(app, '/busy')).statusCode === 302, 'the visit to be redirected again')
  await until(async () => (await app.inject('/readyz')).json().status === 'ready', '/readyz to say ready again')
})

t.test('tasks that hold the event loop longer than a whole sample, at the default limit: refused too', async (t) => {
  // Slices of 1,500 ms against the default limit of 1,000 ms sampled every second: an interval with no sample at all
  // (under-pressure's Infinity), which counted as no pressure.
  // (The tests' configuration turns the check off: the service's default is set again here.)
  const test = await buildTestApp(t, { env: { OVERLOAD_EVENT_LOOP_DELAY_MS: '1000' }, overload: { sampleIntervalMs: 1000 } })
  const { app } = test
  t.equal(test.config.overload.eventLoopDelayMs, loadConfig({}).overload.eventLoopDelayMs, 'the default limit')
  const { token } = await acmeWorkspace(test)
  const list = () => app.inject({ url: '/v1/links', headers: { 'api-authorization': token } })
  await until(async () => (await list()).statusCode === 200, 'the API to answer before the test')
  const stop = saturateEventLoop(1500)
  t.teardown(stop)
  await until(() => app.overload.reason() === 'event_loop', 'the event loop to count as saturated', 20_000)
  assertOverloaded(t, await refusedOnce(list, 'the API'), /event loop/)
  stop()
  await until(async () => (await list()).statusCode === 200, 'the API to answer again')
})

t.test('a busy pool below the overload limit: /readyz says ready, at once (the database answers)', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL (one connection on the embedded database)' }, async (t) => {
  const test = await buildTestApp(t)
  const { app, database } = test
  t.same((await app.inject('/readyz')).json(), { status: 'ready' }, 'started (its start-up reads done)')
  // Every connection of the main pool held for 2 s, and 5 more queries waiting for one: busy, not out of reach.
  const held = Array.from({ length: 15 }, (_, i) => database.sql(i < 10 ? 'SELECT pg_sleep(2)' : 'SELECT 1'))
  await until(() => database.pools().find((pool) => pool.name === 'main')!.waiting > 0, 'queries to wait for a connection', 5_000)
  const started = Date.now()
  const ready = await app.inject('/readyz')
  const tookMs = Date.now() - started
  t.same([ready.statusCode, ready.json()], [200, { status: 'ready' }], 'asked on a connection of its own')
  t.ok(tookMs < 1500, `in ${tookMs} ms (it waited 3 s in the pool's queue, then said "database unreachable")`)
  // A flood of probes (they need no token) while the pool is busy opens no connection each.
  let connects = 0
  const prototype = pg.Client.prototype as unknown as { connect: (...args: unknown[]) => unknown }
  const connect = prototype.connect
  prototype.connect = function (this: unknown, ...args: unknown[]) {
    connects++
    return connect.apply(this, args)
  }
  t.teardown(() => {
    prototype.connect = connect
  })
  const flood = await Promise.all(Array.from({ length: 40 }, () => app.inject('/readyz')))
  for (let i = 0; i < 10; i++) flood.push(await app.inject('/readyz'))
  t.ok(flood.every((answer) => answer.statusCode === 200))
  t.ok(connects <= 1, `${connects} connections for 50 probes within the second`)
  await Promise.all(held)
})

t.test('a saturated database pool: the API gets 503 at once, not after a wait; visitors go on; then recovery', async (t) => {
  const test = await buildTestApp(t, {
    env: { OVERLOAD_DB_POOL_WAITING: '3' },
    overload: { poolCheckIntervalMs: 20 },
  })
  const { app, database } = test
  const { token, link } = await acmeWorkspace(test)
  await link({ id: 'warm', url: 'https://example.com/warm' })
  t.equal((await visit(app, '/warm')).statusCode, 302, 'the link is warm in the redirect cache')
  const list = () => app.inject({ url: '/v1/links', headers: { 'api-authorization': token } })
  t.equal((await list()).statusCode, 200)

  // Every connection of the main pool held for 2 s (PostgreSQL's 10; the embedded database is one, whose queue of
  // statements has no deadline at all), and 5 more queries waiting for one.
  const connections = database.kind === 'postgres' ? 10 : 1
  const hold = () => (database.kind === 'postgres' ? database.sql('SELECT pg_sleep(2)') : database.transaction(() => sleep(2000)))
  const held = Array.from({ length: connections + 5 }, (_, i) => (i < connections ? hold() : database.sql('SELECT 1')))
  await until(() => app.overload.reason() === 'database_pool', 'the pool to count as saturated', 5_000)
  const started = Date.now()
  const refused = await list()
  const tookMs = Date.now() - started
  assertOverloaded(t, refused, /overloaded \(its database pool is saturated\)/)
  t.ok(tookMs < 1000, `refused in ${tookMs} ms, not after waiting for a connection`)
  t.equal((await visit(app, '/warm')).statusCode, 302, 'a visit needs no main-pool connection: answered')
  const ready = await app.inject('/readyz')
  t.equal(ready.statusCode, 503)
  t.same(ready.json(), { status: 'overloaded: database pool saturated' })
  t.equal((await app.inject('/healthz')).statusCode, 200)
  const metrics = await metricsOf(app)
  t.ok(valueOf(metrics, 'shortlinks_db_pool_waiting_queries', { pool: 'main' })! > 3, 'the waiting queries are seen')
  t.equal(valueOf(metrics, 'shortlinks_overloaded', { reason: 'database_pool' }), 1)
  t.ok(valueOf(metrics, 'shortlinks_overload_rejections_total', { reason: 'database_pool' })! >= 1)

  await Promise.all(held)
  await until(() => app.overload.reason() === null, 'the pool to recover')
  t.equal((await list()).statusCode, 200, 'after: the API answers')
  t.same((await app.inject('/readyz')).json(), { status: 'ready' })
})
