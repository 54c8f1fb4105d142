/**
 * The management API under load (`npm run bench`): the real service (bench/api-server.ts: PostgreSQL from
 * DATABASE_URL, default the local server, on a database of the run's own; Redis from REDIS_URL, default the local
 * one; LOG_LEVEL=info) beside a bare reference process started by this same script (bare Fastify + `pg`, the one
 * single-row statement of each operation, prepared, on the service's own tables, and a fixed answer), each loaded in
 * turn by autocannon over loopback.
 *
 * Scenarios and their references:
 *   create         POST /v1/links/create {url}, autofill off            bare INSERT … RETURNING
 *   create-many    the same with most fields (tags, folder, pixels, …)   bare INSERT … RETURNING
 *   bulk           POST /v1/links/bulk, BENCH_BULK links each            bare INSERT … RETURNING (per link)
 *   update         PUT /v1/links/{uniq} {title}, autofill off            bare UPDATE … RETURNING
 *   get            GET /v1/links/{uniq}                                  bare SELECT by key
 *   list           GET /v1/links?limit=20                                bare SELECT of 20
 *   delete         DELETE /v1/links/{uniq}                               bare DELETE by key
 *   healthz        GET /healthz                                          bare fixed answer
 *
 * Prints requests/s (2xx answers a second), p50/p99, errors (non-2xx, socket errors, timeouts), statements per request, the
 * service's CPU time per request and PostgreSQL's (its processes on this machine, bench/support/postgres-cpu.ts), the
 * ratio of the service to its reference, and the service's RSS at rest and at its peak (in each scenario too). The ratio within one run
 * is the figure that counts: the machine's other load weighs on both alike.
 *
 * The service runs as `npm start` runs it (bench/support/production-node.ts: its environment and node flags).
 *
 * Options (environment): BENCH_DURATION (s per run, default 5), BENCH_CONNECTIONS (default 50), BENCH_ONLY
 * (comma-separated scenario names), BENCH_BULK (links per bulk request, default 100), BENCH_SERVICE_ARGS (extra
 * node flags for the service, e.g. --cpu-prof), BENCH_PROFILE_DIR (a directory that gets a CPU profile of each
 * scenario's run of the service alone, `<scenario>.cpuprofile`).
 */
import autocannon from 'autocannon'
import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { ask, compileBench, startServer, stop } from './support/child-server.js'
import { postgresCpu, postgresCpuMicros } from './support/postgres-cpu.js'

const DURATION = Number(process.env.BENCH_DURATION ?? 5)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const BULK = Number(process.env.BENCH_BULK ?? 100)
const ONLY = process.env.BENCH_ONLY?.split(',').map((name) => name.trim())
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR
if (PROFILE_DIR) mkdirSync(PROFILE_DIR, { recursive: true })
const LINKS = 10_000

interface Server {
  child: ChildProcess
  port: number
  token?: string
  folderId?: number
  firstLink: number
  firstDeletable: number
  deletable: number
}

interface Stats {
  cpuMicros: number
  rss: number
  heapUsed: number
  startRss: number
  maxRss: number
  statements: number
}

/** The service and the reference; the service's log goes where production sends it (a pipe), read and dropped. */
function start(script: string, mode: 'service' | 'bare'): Promise<Server> {
  return startServer<Omit<Server, 'child'>>(script, mode, {
    pipeOutput: true,
    env: {
      DATABASE_URL: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test',
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    },
  })
}

type Request = { method: string; path: string; body?: string }
/** A scenario: the service's request and its reference's, each built afresh for every request. */
interface Scenario {
  name: string
  reference: string
  service: (server: Server) => () => Request
  bare: (server: Server) => () => Request
  /** Links per request (bulk). */
  perRequest?: number
}

const random = (server: Server) => server.firstLink + Math.floor(Math.random() * LINKS)
const plainLink = () => ({ url: `https://example.com/landing/${randomBytes(4).toString('hex')}` })
const fullLink = (server: Server) => ({
  url: `https://example.com/spring/${randomBytes(4).toString('hex')}?utm_source=newsletter`,
  title: 'Spring sale',
  description: 'Everything at half price until Sunday',
  image: 'https://example.com/spring.png',
  favicon: 'https://example.com/favicon.ico',
  tags: 'spring,sale,newsletter,Q2,promo',
  note: 'Send on Monday',
  folderId: String(server.folderId),
  showGDPR: true,
  extraOptionsGeolocations: [
    { url: 'https://example.de/spring', value: 'de' },
    { url: 'https://example.fr/spring', value: 'FR' },
    { url: 'https://example.co.uk/spring', value: 'GB' },
  ],
  extraOptionsLinkRotator: [
    { url: 'https://example.com/spring-a', value: 30 },
    { url: 'https://example.com/spring-b', value: '20' },
  ],
  pixels: [
    { platform: 'facebook', value: '1234567890', title: 'Retargeting' },
    { platform: 'gtm', value: 'GTM-ABC123' },
  ],
  linkExpiration: { enable: true, end: '2031-06-30T22:00:00.000Z', url: 'https://example.com/over', timezone: 2 },
})
const insert = () => () => ({ method: 'POST', path: '/insert', body: JSON.stringify({ link: plainLink() }) })

const scenarios: Scenario[] = [
  {
    name: 'create',
    reference: 'INSERT',
    service: () => () => ({ method: 'POST', path: '/v1/links/create', body: JSON.stringify({ link: plainLink(), autofill: false }) }),
    bare: insert,
  },
  {
    name: 'create-many',
    reference: 'INSERT',
    service: (server) => () => ({ method: 'POST', path: '/v1/links/create', body: JSON.stringify({ link: fullLink(server), autofill: false }) }),
    bare: insert,
  },
  {
    name: 'bulk',
    reference: 'INSERT',
    perRequest: BULK,
    service: () => () => ({
      method: 'POST',
      path: '/v1/links/bulk',
      body: JSON.stringify({ links: Array.from({ length: BULK }, plainLink), autofill: false }),
    }),
    bare: insert,
  },
  {
    name: 'update',
    reference: 'UPDATE',
    service: (server) => () => ({
      method: 'PUT',
      path: `/v1/links/${random(server)}`,
      body: JSON.stringify({ link: { title: `Title ${randomBytes(4).toString('hex')}` }, autofill: false }),
    }),
    bare: (server) => () => ({
      method: 'PUT',
      path: `/update/${random(server)}`,
      body: JSON.stringify({ link: { title: `Title ${randomBytes(4).toString('hex')}` } }),
    }),
  },
  {
    name: 'get',
    reference: 'SELECT 1',
    service: (server) => () => ({ method: 'GET', path: `/v1/links/${random(server)}` }),
    bare: (server) => () => ({ method: 'GET', path: `/select/${random(server)}` }),
  },
  {
    name: 'list',
    reference: 'SELECT 20',
    service: () => () => ({ method: 'GET', path: '/v1/links?limit=20' }),
    bare: () => () => ({ method: 'GET', path: '/list' }),
  },
  {
    name: 'delete',
    reference: 'DELETE',
    service: (server) => {
      let next = server.firstDeletable
      return () => ({ method: 'DELETE', path: `/v1/links/${next++}` })
    },
    bare: (server) => {
      let next = server.firstDeletable
      return () => ({ method: 'DELETE', path: `/delete/${next++}` })
    },
  },
  {
    name: 'healthz',
    reference: 'fixed',
    service: () => () => ({ method: 'GET', path: '/healthz' }),
    bare: () => () => ({ method: 'GET', path: '/fixed' }),
  },
]

interface Run {
  rps: number
  p50: number
  p99: number
  errors: number
  requests: number
  statementsPerRequest: number
  cpuPerRequest: number
  /** PostgreSQL's CPU time per request (all its processes on this machine), or null where it cannot be read. */
  postgresCpuPerRequest: number | null
  maxRss: number
}

const nullOr = <T, R>(value: T | null, then: (value: T) => R): R | null => (value === null ? null : then(value))

async function load(server: Server, next: () => Request, seconds: number): Promise<Run> {
  await ask(server, 'reset peak')
  const before = await ask<Stats>(server, 'stats')
  const postgresBefore = postgresCpu()
  const result = await autocannon({
    url: `http://127.0.0.1:${server.port}`,
    connections: CONNECTIONS,
    duration: seconds,
    headers: server.token ? { 'api-authorization': server.token } : {},
    requests: [
      {
        setupRequest: (request) => {
          const { method, path, body } = next()
          const headers = body === undefined ? request.headers : { ...request.headers, 'content-type': 'application/json' }
          return { ...request, method, path, body, headers } as typeof request
        },
      },
    ],
  })
  const postgresAfter = postgresCpu()
  const after = await ask<Stats>(server, 'stats')
  const requests = result['1xx'] + result['2xx'] + result['3xx'] + result['4xx'] + result['5xx']
  return {
    // Successes a second: an error answered fast must not count as throughput.
    rps: result['2xx'] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    // autocannon counts a timeout among the errors too.
    errors: result.non2xx + result.errors,
    requests,
    statementsPerRequest: (after.statements - before.statements) / Math.max(1, requests),
    cpuPerRequest: (after.cpuMicros - before.cpuMicros) / Math.max(1, requests),
    postgresCpuPerRequest: nullOr(postgresCpuMicros(postgresBefore, postgresAfter), (micros) => micros / Math.max(1, requests)),
    maxRss: after.maxRss,
  }
}

const fmt = (n: number, digits = 0, width = 8) => n.toFixed(digits).padStart(width)
const postgresColumn = (run: Run, width: number) => (run.postgresCpuPerRequest === null ? '—'.padStart(width) : fmt(run.postgresCpuPerRequest, 0, width))
const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`

async function main() {
  console.log('compiling (tsc)…')
  const script = compileBench('api-server')
  const [bare, service] = await Promise.all([start(script, 'bare'), start(script, 'service')])
  const atRest = await ask<Stats>(service, 'stats')
  const selected = scenarios.filter((scenario) => !ONLY || ONLY.includes(scenario.name))
  console.log(
    `PostgreSQL ${process.env.DATABASE_URL ? '(DATABASE_URL)' : 'postgresql://postgres@127.0.0.1:5432'}; Redis ${process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'}; ` +
      `autocannon ${CONNECTIONS} connections, ${DURATION} s per run; load average before: ${loadavg().map((n) => n.toFixed(2)).join(' ')}`,
  )
  console.log('warming up (2 s each of get and healthz on both)…')
  await load(bare, scenarios.find((s) => s.name === 'get')!.bare(bare), 2)
  await load(service, scenarios.find((s) => s.name === 'get')!.service(service), 2)
  await load(bare, scenarios.find((s) => s.name === 'healthz')!.bare(bare), 2)
  await load(service, scenarios.find((s) => s.name === 'healthz')!.service(service), 2)

  const rows: { scenario: Scenario; service: Run; bare: Run }[] = []
  let peak = 0
  for (const scenario of selected) {
    const bareRun = await load(bare, scenario.bare(bare), DURATION)
    if (PROFILE_DIR) await ask(service, 'profile start')
    const serviceRun = await load(service, scenario.service(service), DURATION)
    if (PROFILE_DIR) await ask(service, `profile stop ${join(PROFILE_DIR, `${scenario.name}.cpuprofile`)}`)
    peak = Math.max(peak, serviceRun.maxRss)
    rows.push({ scenario, service: serviceRun, bare: bareRun })
    process.stdout.write(`  ${scenario.name} done\n`)
  }
  const end = await ask<Stats>(service, 'stats')

  console.log('')
  console.log(`load average after: ${loadavg().map((n) => n.toFixed(2)).join(' ')}`)
  console.log(
    '| scenario    | service req/s | p50 ms | p99 ms | errors | stmts/req | CPU µs/req | PG µs/req | reference        | ref req/s | ref p50 | ref p99 | ref err | ref CPU µs/req | ref PG µs/req | ratio | peak RSS |',
  )
  console.log(
    '|-------------|--------------:|-------:|-------:|-------:|----------:|-----------:|----------:|------------------|----------:|--------:|--------:|--------:|---------------:|--------------:|------:|---------:|',
  )
  for (const { scenario, service: s, bare: b } of rows) {
    const per = scenario.perRequest ?? 1
    // Bulk: links per second against the reference's single-row inserts per second.
    const ratio = (s.rps * per) / b.rps
    const label = per > 1 ? `${scenario.name} (${per})` : scenario.name
    console.log(
      `| ${label.padEnd(11)} | ${fmt(s.rps, 0, 13)} | ${fmt(s.p50, 1, 6)} | ${fmt(s.p99, 1, 6)} | ${fmt(s.errors, 0, 6)} | ${fmt(s.statementsPerRequest, 2, 9)} | ` +
        `${fmt(s.cpuPerRequest, 0, 10)} | ${postgresColumn(s, 9)} | ${`bare ${scenario.reference}`.padEnd(16)} | ${fmt(b.rps, 0, 9)} | ${fmt(b.p50, 1, 7)} | ` +
        `${fmt(b.p99, 1, 7)} | ${fmt(b.errors, 0, 7)} | ${fmt(b.cpuPerRequest, 0, 14)} | ${postgresColumn(b, 13)} | ${fmt(100 * ratio, 0, 4)}% | ${mb(s.maxRss).padStart(8)} |`,
    )
  }
  const bulk = rows.find((row) => row.scenario.name === 'bulk')
  const create = rows.find((row) => row.scenario.name === 'create')
  if (bulk && create) {
    console.log(
      `bulk: ${(bulk.service.rps * BULK).toFixed(0)} links/s against ${create.service.rps.toFixed(0)} of single creates: ` +
        `${((bulk.service.rps * BULK) / create.service.rps).toFixed(1)}× (target ≥ 5×)`,
    )
  }
  console.log(
    `service RSS: ${mb(atRest.rss)} at rest after start, ${mb(end.rss)} at the end (V8 heap used ${mb(end.heapUsed)}), ` +
      `${mb(peak)} at its peak under load (target < 200 MB)`,
  )
  console.log('targets: create, update, get ≥ 50% of their reference; list ≥ 30%; healthz ≥ 60%')
  await stop(bare)
  await stop(service)
}

await main()
