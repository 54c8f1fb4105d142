/**
 * A soak (`npm run soak`): the service under a steady mixed traffic for SOAK_MINUTES (default 10), at half of the
 * peak it reached with the same mix, to show that it holds: no errors, and no memory growth.
 *
 * The service runs as `npm start` runs it (bench/soak-server.ts, bench/support/child-server.ts: compiled, its
 * node flags and environment), on PostgreSQL from DATABASE_URL (a database of the run's own) or an in-memory
 * PGlite, and Redis from REDIS_URL or the in-process stores, over 10,000 links (l1 … l10000 on go.soak.test).
 *
 * The mix, per request (autocannon over loopback, SOAK_CONNECTIONS connections):
 *   80% visits:   72% a warm link (one of l1 … l1000), 7% a cold one (the other 9,000 in turn), 1% an unknown slug
 *   20% API:       3% create, 3% update (a title), 5% get, 4% list (20 links), 5% a link's stats (a hot link)
 * Each request knows its expected status (302, 404 for the unknown slugs, 201, 200); any other is counted.
 *
 * Steps: 5 s of warm-up, SOAK_PEAK_SECONDS (default 10) at full speed to measure the peak (autocannon), then one
 * run per minute at half of that peak, its requests evenly spaced (bench/support/steady-load.ts: autocannon's own
 * rate sends each second's share in a burst). Each minute prints requests/s, p50/p99 latency (from the instant each
 * request was due), socket errors and timeouts, unexpected statuses, and the service's RSS and V8 heap. The verdict: errors in
 * total (socket errors + timeouts + unexpected statuses, all minutes) must be 0, and the RSS at the end of the
 * last minute must be within 10% of the RSS at the end of the second (the first is warm-up of caches and pools).
 * The exit code is 1 when either fails.
 */
import autocannon from 'autocannon'
import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { loadavg } from 'node:os'
import { ask, compileBench, startServer, stop } from './support/child-server.js'
import { steadyLoad, type SteadyRequest } from './support/steady-load.js'

const MINUTES = Number(process.env.SOAK_MINUTES ?? 10)
const PEAK_SECONDS = Number(process.env.SOAK_PEAK_SECONDS ?? 10)
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 50)
const MAX_GROWTH = 0.1
const DOMAIN = 'go.soak.test'
const LINKS = 10_000
const HOT = 1000
const USER_AGENT = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36'

interface Service {
  child: ChildProcess
  port: number
  token: string
  firstLink: number
  database: string
  redis: string
}

interface Stats {
  rss: number
  heapUsed: number
  heapTotal: number
  visits: Record<string, number> | null
}

interface Request {
  method: string
  path: string
  body?: string
  /** A visit (Host: the short domain) rather than an API call (with the token). */
  visit?: boolean
  expect: number
}

/** The cumulative shares of the mix, in the order drawn. */
const MIX: [number, (service: Service) => Request][] = []
let coldCursor = 0
let mixTotal = 0
function share(percent: number, next: (service: Service) => Request) {
  mixTotal += percent
  MIX.push([mixTotal / 100, next])
}
const seeded = (service: Service, n: number) => service.firstLink + n - 1
const anyLink = () => 1 + Math.floor(Math.random() * LINKS)
const hotLink = () => 1 + Math.floor(Math.random() * HOT)
share(72, () => ({ method: 'GET', path: `/l${hotLink()}`, visit: true, expect: 302 }))
share(7, () => {
  coldCursor = (coldCursor + 1) % (LINKS - HOT)
  return { method: 'GET', path: `/l${HOT + 1 + coldCursor}`, visit: true, expect: 302 }
})
share(1, () => ({ method: 'GET', path: `/u${randomBytes(6).toString('hex')}`, visit: true, expect: 404 }))
share(3, () => ({
  method: 'POST',
  path: '/v1/links/create',
  body: JSON.stringify({ link: { url: `https://example.com/soak/${randomBytes(4).toString('hex')}`, tags: 'soak' }, autofill: false }),
  expect: 201,
}))
share(3, (service) => ({
  method: 'PUT',
  path: `/v1/links/${seeded(service, anyLink())}`,
  body: JSON.stringify({ link: { title: `Title ${randomBytes(4).toString('hex')}` }, autofill: false }),
  expect: 200,
}))
share(5, (service) => ({ method: 'GET', path: `/v1/links/${seeded(service, anyLink())}`, expect: 200 }))
share(4, () => ({ method: 'GET', path: '/v1/links?limit=20', expect: 200 }))
share(5, (service) => ({ method: 'GET', path: `/v1/links/${seeded(service, hotLink())}/stats`, expect: 200 }))
if (mixTotal !== 100) throw new Error(`the mix adds up to ${mixTotal}%`)

function nextRequest(service: Service): Request {
  const draw = Math.random()
  return MIX.find(([upTo]) => draw < upTo)![1](service)
}

/** What autocannon's per-connection context holds between a request and its answer. */
interface Expectation {
  expect: number
}

interface Run {
  rps: number
  p50: number
  p99: number
  requests: number
  /** Socket errors and timeouts. */
  errors: number
  /** Answers whose status was not the one their request expects, by status. */
  unexpected: Record<number, number>
}

function headersOf(service: Service, next: Request): Record<string, string> {
  return next.visit
    ? { host: DOMAIN, 'user-agent': USER_AGENT }
    : { 'api-authorization': service.token, ...(next.body ? { 'content-type': 'application/json' } : {}) }
}

/** As fast as the service answers (autocannon). */
async function load(service: Service, seconds: number): Promise<Run> {
  const unexpected: Record<number, number> = {}
  const result = await autocannon({
    url: `http://127.0.0.1:${service.port}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        // One request at a time per connection (no pipelining), so the context holds this request's expectation
        // when its answer arrives.
        setupRequest: (request, context) => {
          const next = nextRequest(service)
          Object.assign(context, { expect: next.expect } satisfies Expectation)
          return { ...request, method: next.method, path: next.path, body: next.body, headers: headersOf(service, next) } as typeof request
        },
        onResponse: (status, _body, context) => {
          if (status !== (context as Expectation).expect) unexpected[status] = (unexpected[status] ?? 0) + 1
        },
      },
    ],
  })
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    // autocannon counts a timeout among the errors too.
    errors: result.errors,
    unexpected,
  }
}

/** At a steady `rate` a second. */
async function steady(service: Service, seconds: number, rate: number): Promise<Run> {
  const result = await steadyLoad(`http://127.0.0.1:${service.port}`, {
    rate,
    seconds,
    connections: CONNECTIONS,
    next: (): SteadyRequest => {
      const next = nextRequest(service)
      return { method: next.method as SteadyRequest['method'], path: next.path, body: next.body, headers: headersOf(service, next), expect: next.expect }
    },
  })
  const requests = Object.values(result.statuses).reduce((sum, n) => sum + n, 0) + result.errors
  return { rps: result.rps, p50: result.p50, p99: result.p99, requests, errors: result.errors, unexpected: result.unexpected }
}

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`
const count = (unexpected: Record<number, number>) => Object.values(unexpected).reduce((sum, n) => sum + n, 0)

async function main(): Promise<number> {
  if (!(MINUTES >= 2)) throw new Error('SOAK_MINUTES must be at least 2 (the growth is measured from the second minute on)')
  console.log('compiling (tsc)…')
  const script = compileBench('soak-server')
  // The service's log goes where production sends it (a pipe), read and dropped.
  const service = await startServer<Omit<Service, 'child'>>(script, 'service', { pipeOutput: true })
  try {
    const start = await ask<Stats>(service, 'stats')
    console.log(
      `database: ${service.database}; ${service.redis}; ${LINKS} links; autocannon ${CONNECTIONS} connections; ` +
        `load average: ${loadavg().map((n) => n.toFixed(2)).join(' ')}; service RSS once started: ${mb(start.rss)}`,
    )
    console.log('mix: visits 80% (72% warm, 7% cold, 1% unknown), API 20% (3% create, 3% update, 5% get, 4% list, 5% stats)')
    await load(service, 5)
    const peak = await load(service, PEAK_SECONDS)
    const rate = Math.floor(peak.rps / 2)
    console.log(
      `peak: ${peak.rps.toFixed(0)} req/s (p50 ${peak.p50} ms, p99 ${peak.p99} ms, errors ${peak.errors}, unexpected ${JSON.stringify(peak.unexpected)}); ` +
        `soaking ${MINUTES} min at ${rate} req/s`,
    )
    console.log('minute    req/s   p50 ms   p99 ms   errors  unexpected          RSS     heap used')
    const minutes: (Run & Stats)[] = []
    for (let minute = 1; minute <= MINUTES; minute++) {
      const run = await steady(service, 60, rate)
      const stats = await ask<Stats>(service, 'stats')
      minutes.push({ ...run, ...stats })
      console.log(
        `${String(minute).padStart(6)} ${run.rps.toFixed(0).padStart(8)} ${run.p50.toFixed(1).padStart(8)} ${run.p99.toFixed(1).padStart(8)} ` +
          `${String(run.errors).padStart(8)}  ${(Object.keys(run.unexpected).length ? JSON.stringify(run.unexpected) : '0').padEnd(12)} ` +
          `${mb(stats.rss).padStart(10)} ${mb(stats.heapUsed).padStart(12)}`,
      )
    }
    const last = minutes[minutes.length - 1]
    const errors = minutes.reduce((sum, run) => sum + run.errors + count(run.unexpected), 0)
    const growth = (last.rss - minutes[1].rss) / minutes[1].rss
    console.log(`visits since start: ${JSON.stringify(last.visits)}`)
    const errorsOk = errors === 0
    const growthOk = growth <= MAX_GROWTH
    console.log(
      `verdict: errors ${errors} (${errorsOk ? 'ok' : 'FAIL'}: must be 0); RSS ${mb(minutes[1].rss)} after minute 2, ${mb(last.rss)} after minute ${MINUTES}: ` +
        `${growth >= 0 ? '+' : ''}${(100 * growth).toFixed(1)}% (${growthOk ? 'ok' : 'FAIL'}: at most +${100 * MAX_GROWTH}%)`,
    )
    return errorsOk && growthOk ? 0 : 1
  } finally {
    await stop(service)
  }
}

process.exitCode = await main()
