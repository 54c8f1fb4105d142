/**
 * Plain redirects under load (`npm run bench:redirect`): the real service (bench/redirect-server.ts, over 10,000
 * links, PostgreSQL from DATABASE_URL else an in-memory PGlite, Redis from REDIS_URL if set) beside a bare
 * Fastify route answering a fixed 302, each in its own process, loaded by autocannon over loopback with the same
 * mix of addresses: 90% warm (1,000 links visited often), 9% cold (the other 9,000 in turn, through a cache of
 * 2,000 entries, so each is read from the database), 1% unknown (a new random slug each time). Prints, for
 * each, requests/s and p50/p99 latency at full rate, the ratio, p50/p99 at half of the peak rate (a steady load,
 * bench/support/steady-load.ts: autocannon's own rate sends bursts), the service's RSS and its database reads per visit.
 *
 * The two servers take turns (BENCH_ROUNDS runs each), and each run also measures the server's CPU time per
 * request, which other load on the machine does not change the way it changes throughput, and PostgreSQL's (the
 * visits' writes: on two cores, the database's share is taken from the service's).
 *
 * Options (environment): BENCH_DURATION (s per run, default 5), BENCH_ROUNDS (default 3), BENCH_CONNECTIONS (default 50),
 * BENCH_CACHE_ENTRIES (default 2000), BENCH_COLD and BENCH_UNKNOWN (the shares, default 0.09 and 0.01), BENCH_SERVICE_ARGS (extra node flags for the service, e.g. --cpu-prof).
 *
 * The service process runs with the node flags and environment of `npm start` (bench/support/production-node.ts).
 * After each recorded run the service writes its buffer and rolls the run's visits up into the aggregates (the
 * minute's rollup, src/analytics/visit-rollup.ts); both times are printed and charged to the run as if they
 * had stopped the machine meanwhile (a bound from below).
 */
import autocannon from 'autocannon'
import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { get, type IncomingMessage } from 'node:http'
import { ask, compileBench, startServer, stop } from './support/child-server.js'
import { postgresCpu, postgresCpuMicros } from './support/postgres-cpu.js'
import { steadyLoad } from './support/steady-load.js'

const DURATION = Number(process.env.BENCH_DURATION ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const HOT = 1000
const COLD = Number(process.env.BENCH_COLD ?? 0.09)
const UNKNOWN = Number(process.env.BENCH_UNKNOWN ?? 0.01)
const LINKS = 10_000
const USER_AGENT = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36'

interface Server {
  child: ChildProcess
  port: number
  cacheEntries?: number
}

const start = (script: string, mode: 'service' | 'bare') => startServer<Omit<Server, 'child'>>(script, mode)

/** 90% of the 1,000 hot links, 9% the next of the other 9,000 in turn, 1% a slug nobody made. */
let coldCursor = 0
function nextPath(): string {
  const draw = Math.random()
  if (draw < 1 - COLD - UNKNOWN) return `/l${1 + Math.floor(Math.random() * HOT)}`
  if (draw < 1 - UNKNOWN) {
    coldCursor = (coldCursor + 1) % (LINKS - HOT)
    return `/l${HOT + 1 + coldCursor}`
  }
  return `/u${randomBytes(6).toString('hex')}`
}

interface Run {
  rps: number
  p50: number
  p99: number
  answered: number
  /** The server's CPU time (user + system) per answer, µs: what a request costs, whatever else the machine runs. */
  cpuPerRequest: number
  /** PostgreSQL's CPU time per answer, µs (bench/support/postgres-cpu.ts; NaN where it cannot be read). */
  postgresCpuPerRequest: number
  /** The server's event loop and garbage collector during the run (bench/redirect-server.ts). */
  pauses: RunPauses
}

interface RunPauses {
  loopDelayP99Ms: number
  loopDelayMaxMs: number
  gcPauses: number
  gcTotalMs: number
  gcMaxMs: number
}

/** After a recorded run: the buffer written, then the run's visits summed into the aggregates. */
interface Rollup {
  flushMs: number
  rollupMs: number
  visits: number
}

interface Stats {
  cpuMicros: number
  rss: number
  heapTotal: number
  startRss: number
  maxRss: number
  reads: number
  statements: number
  counters: Record<string, number> | null
  visits: Record<string, number> | null
  loopDelayMaxMs: number
  loopDelayP99Ms: number
  run: RunPauses
}

const HEADERS = { host: 'go.bench.test', 'user-agent': USER_AGENT }

/** As fast as the server answers (autocannon), or at a steady `rate` a second. */
async function load(server: Server, seconds: number, rate?: number, prefix = ''): Promise<Run> {
  await ask(server, 'run start')
  const before = await ask<Stats>(server, 'stats')
  const postgresBefore = postgresCpu()
  const url = `http://127.0.0.1:${server.port}`
  let result: { rps: number; p50: number; p99: number; byClass: Record<string, number>; errors: number }
  if (rate === undefined) {
    const run = await autocannon({
      url,
      connections: CONNECTIONS,
      duration: seconds,
      headers: HEADERS,
      requests: [{ method: 'GET', setupRequest: (request) => ({ ...request, path: prefix + nextPath() }) }],
    })
    const byClass = { '2xx': run['2xx'], '3xx': run['3xx'], '4xx': run['4xx'], '5xx': run['5xx'] }
    // autocannon counts a timeout among the errors too.
    result = { rps: run.requests.average, p50: run.latency.p50, p99: run.latency.p99, byClass, errors: run.errors }
  } else {
    const run = await steadyLoad(url, { rate, seconds, connections: CONNECTIONS, next: () => ({ path: prefix + nextPath(), headers: HEADERS }) })
    const byClass: Record<string, number> = { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 }
    for (const [status, n] of Object.entries(run.statuses)) byClass[`${String(status)[0]}xx`] += n
    result = { ...run, byClass }
  }
  const postgresMicros = postgresCpuMicros(postgresBefore, postgresCpu())
  const after = await ask<Stats>(server, 'stats')
  const { byClass } = result
  if (result.errors || byClass['5xx'] || byClass['2xx']) throw new Error(`errors ${result.errors}, 2xx ${byClass['2xx']}, 5xx ${byClass['5xx']}`)
  const answered = byClass['3xx'] + byClass['4xx']
  return { rps: result.rps, p50: result.p50, p99: result.p99, answered, cpuPerRequest: (after.cpuMicros - before.cpuMicros) / answered,
    postgresCpuPerRequest: postgresMicros === null ? NaN : postgresMicros / answered,
    pauses: after.run,
  }
}

const median = (values: number[]) => values.slice().sort((a, b) => a - b)[Math.floor(values.length / 2)]
const fmt = (n: number, digits = 0) => n.toFixed(digits).padStart(8)

/**
 * Runs of the targets in turn, so that whatever else loads the machine weighs on each alike; the median run of
 * each. `fixed` is the service process answering its fixed 302 route (bench/redirect-server.ts).
 */
async function alternate(bare: Server, service: Server, overallRate?: { bare: number; service: number; fixed: number; unrecorded: number }) {
  const runs: Record<'bare' | 'service' | 'fixed' | 'unrecorded', Run[]> = { bare: [], service: [], fixed: [], unrecorded: [] }
  const rollups: Rollup[] = []
  for (let round = 0; round < ROUNDS; round++) {
    runs.bare.push(await load(bare, DURATION, overallRate?.bare))
    runs.service.push(await load(service, DURATION, overallRate?.service))
    rollups.push(await ask<Rollup>(service, 'rollup'))
    runs.fixed.push(await load(service, DURATION, overallRate?.fixed, '/fixed'))
    await ask(service, 'recording off')
    runs.unrecorded.push(await load(service, DURATION, overallRate?.unrecorded))
    await ask(service, 'recording on')
  }
  const summary = (list: Run[]) => ({
    rps: median(list.map((run) => run.rps)),
    p50: median(list.map((run) => run.p50)),
    p99: median(list.map((run) => run.p99)),
    cpuPerRequest: median(list.map((run) => run.cpuPerRequest)),
    postgresCpuPerRequest: median(list.map((run) => run.postgresCpuPerRequest)),
    answered: list.reduce((sum, run) => sum + run.answered, 0),
    pauses: {
      loopDelayP99Ms: median(list.map((run) => run.pauses.loopDelayP99Ms)),
      loopDelayMaxMs: median(list.map((run) => run.pauses.loopDelayMaxMs)),
      gcPauses: median(list.map((run) => run.pauses.gcPauses)),
      gcTotalMs: median(list.map((run) => run.pauses.gcTotalMs)),
      gcMaxMs: median(list.map((run) => run.pauses.gcMaxMs)),
    },
  })
  return {
    bare: summary(runs.bare),
    service: summary(runs.service),
    fixed: summary(runs.fixed),
    unrecorded: summary(runs.unrecorded),
    recordingRatios: runs.service.map((run, i) => run.rps / runs.unrecorded[i].rps),
    // The time to write what the run left buffered and to roll its visits up, charged to the run, as if nothing
    // else could run meanwhile (PostgreSQL uses one of the two cores for it): a bound from below on the throughput
    // with recording paid for in full.
    chargedRatios: runs.service.map((run, i) => (run.rps * DURATION) / (DURATION + (rollups[i].flushMs + rollups[i].rollupMs) / 1000) / runs.unrecorded[i].rps),
    rollups,
    ratios: runs.service.map((run, i) => run.rps / runs.bare[i].rps),
  }
}

async function main() {
  console.log('compiling (tsc)…')
  const script = compileBench('redirect-server')
  const bare = await start(script, 'bare')
  const service = await start(script, 'service')
  console.log(
    `database: ${process.env.DATABASE_URL ? 'PostgreSQL (DATABASE_URL)' : 'in-memory PGlite'}; Redis: ${process.env.REDIS_URL ?? 'none'}; ` +
      `${LINKS} links, cache of ${service.cacheEntries} entries; autocannon ${CONNECTIONS} connections; ` +
      `${ROUNDS} runs of ${DURATION} s per server and rate, in turn`,
  )
  console.log('warming up: each hot link once, then 3 s of load each…')
  for (let i = 1; i <= HOT; i++) {
    // node:http, not fetch: fetch may not set the Host header.
    const request = get({ port: service.port, host: '127.0.0.1', path: `/l${i}`, headers: { host: 'go.bench.test', 'user-agent': USER_AGENT } })
    const [response] = (await once(request, 'response')) as [IncomingMessage]
    response.resume()
    if (response.statusCode !== 302) throw new Error(`warm-up: /l${i} answered ${response.statusCode}`)
  }
  await load(bare, 3)
  await load(service, 3)

  const before = await ask<Stats>(service, 'stats')
  // The redirect runs of the service process, recording on and off: both read links.
  const full = await alternate(bare, service)
  const afterFull = await ask<Stats>(service, 'stats')
  const visits = full.service.answered + full.unrecorded.answered
  const half = await alternate(bare, service, {
    bare: Math.floor(full.bare.rps / 2),
    service: Math.floor(full.service.rps / 2),
    fixed: Math.floor(full.fixed.rps / 2),
    unrecorded: Math.floor(full.unrecorded.rps / 2),
  })
  const stats = await ask<Stats>(service, 'stats')

  console.log('')
  console.log(
    'bare: a Fastify process answering a fixed 302; service: the redirects; fixed: the service process answering a fixed 302; ' +
      'unrecorded: the redirects with visit recording switched off',
  )
  console.log('              full rate (median run)                               half of its peak rate (median run)')
  console.log('              req/s    p50 ms    p99 ms  CPU µs/req  PG µs/req       req/s    p50 ms    p99 ms')
  for (const name of ['bare', 'service', 'fixed', 'unrecorded'] as const) {
    const f = full[name]
    const h = half[name]
    console.log(`${name.padEnd(8)} ${fmt(f.rps)}  ${fmt(f.p50, 2)}  ${fmt(f.p99, 2)}  ${fmt(f.cpuPerRequest, 1)}   ${fmt(f.postgresCpuPerRequest, 1)}    ${fmt(h.rps)}  ${fmt(h.p50, 2)}  ${fmt(h.p99, 2)}`)
  }
  console.log('')
  console.log('event loop and garbage collector during the half-rate runs (median run): what holds answers up')
  console.log('            loop delay p99 ms    max ms    GC pauses   GC ms in all   longest GC ms')
  for (const name of ['bare', 'service', 'fixed', 'unrecorded'] as const) {
    const p = half[name].pauses
    console.log(`${name.padEnd(10)} ${fmt(p.loopDelayP99Ms, 2)}          ${fmt(p.loopDelayMaxMs, 1)}   ${fmt(p.gcPauses)}      ${fmt(p.gcTotalMs, 1)}        ${fmt(p.gcMaxMs, 2)}`)
  }
  console.log('')
  const ratios = full.ratios.map((ratio) => `${(100 * ratio).toFixed(0)}%`).join(' ')
  console.log(`service / bare throughput: ${((100 * full.service.rps) / full.bare.rps).toFixed(1)}% (runs: ${ratios}; target ≥ 70%)`)
  console.log(
    `service / bare by server CPU per request: ${((100 * full.bare.cpuPerRequest) / full.service.cpuPerRequest).toFixed(1)}% ` +
      '(the throughput ratio on a machine where each had its cores to itself)',
  )
  console.log(
    `redirects / the service's own fixed 302 route: ${((100 * full.service.rps) / full.fixed.rps).toFixed(1)}% throughput, ` +
      `${((100 * full.fixed.cpuPerRequest) / full.service.cpuPerRequest).toFixed(1)}% by CPU per request (what the redirect's own work costs)`,
  )
  const recordingRatios = full.recordingRatios.map((ratio) => `${(100 * ratio).toFixed(0)}%`).join(' ')
  console.log(
    `recording on / off: ${((100 * full.service.rps) / full.unrecorded.rps).toFixed(1)}% throughput (runs: ${recordingRatios}; target ≥ 90%); ` +
      `visits: ${JSON.stringify(stats.visits)}`,
  )
  const rolled = full.rollups.reduce((sum, r) => ({ ms: sum.ms + r.rollupMs, visits: sum.visits + r.visits }), { ms: 0, visits: 0 })
  const charged = median(full.chargedRatios)
  console.log(
    `after each recorded run, the last writes and the rollup: ${full.rollups.map((r) => `${r.flushMs.toFixed(0)} ms and ${r.visits} visits in ${r.rollupMs.toFixed(0)} ms`).join(', ')} ` +
      `(the rollup ${((1000 * rolled.ms) / rolled.visits).toFixed(1)} µs a visit); recording on / off with both charged to its run: ` +
      `${(100 * charged).toFixed(1)}% (runs: ${full.chargedRatios.map((ratio) => `${(100 * ratio).toFixed(0)}%`).join(' ')})`,
  )
  console.log(`service event-loop delay since start: p99 ${stats.loopDelayP99Ms.toFixed(1)} ms, max ${stats.loopDelayMaxMs.toFixed(1)} ms`)
  console.log(`service p99 at half its peak rate: ${half.service.p99.toFixed(2)} ms (target < 5 ms)`)
  const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`
  console.log(
    `service RSS: ${mb(stats.startRss)} once started, ${mb(stats.rss)} now (V8 heap ${mb(stats.heapTotal)}), ` +
      `${mb(stats.maxRss)} at most (target < 200 MB)`,
  )
  console.log(
    `database reads per visit at full rate: ${((afterFull.reads - before.reads) / visits).toFixed(3)} links ` +
      `(expected about 0.10: 9% cold + 1% unknown) in ${((afterFull.statements - before.statements) / visits).toFixed(3)} statements ` +
      `(several cold links share one); answers since start: ${JSON.stringify(afterFull.counters)}`,
  )
  await stop(bare)
  await stop(service)
}

await main()
