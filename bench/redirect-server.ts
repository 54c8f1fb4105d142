/**
 * The servers of `npm run bench:redirect` (bench/redirect.ts), each in a process of its own so that its CPU and
 * memory are its own: `service` is the real app (real HTTP on loopback, its production logger) over 10,000
 * links; `bare` is a Fastify route that answers a fixed 302. The parent talks to it over IPC: the port once
 * listening, then `stats` (RSS, database reads, answers) and `stop`.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import { randomBytes } from 'node:crypto'
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks'
import { buildApp, loggerOptions } from '../src/app.js'
import { benchConfig, seedWorkspace } from './support/bench-service.js'
import { openTestDatabase } from '../test/support/test-app.js'

export const BENCH_DOMAIN = 'go.bench.test'
export const LINKS = 10_000

const mode = process.argv[2]
const cacheEntries = Number(process.env.BENCH_CACHE_ENTRIES ?? 2000)
const teardowns: (() => unknown)[] = []
let app: FastifyInstance

if (mode === 'bare') {
  app = Fastify()
  app.get('/:slug', (_request, reply) => {
    reply.code(302).header('location', 'https://example.com/landing').send()
  })
} else {
  const config = benchConfig({ LOG_LEVEL: 'info' })
  // A database of the run's own: created on the DATABASE_URL server and dropped afterwards, or in memory.
  const { database } = await openTestDatabase({ teardown: (fn) => teardowns.unshift(fn) })
  await seedWorkspace(database, { name: 'bench', domain: BENCH_DOMAIN, count: LINKS })
  app = await buildApp({
    config,
    database,
    logger: loggerOptions(config),
    redirects: { cache: { maxEntries: cacheEntries }, keyPrefix: `bench-${randomBytes(3).toString('hex')}:` },
    // The rollup runs when the parent asks (IPC `rollup`, after each recorded run), so that its cost is measured.
    visits: { rollup: { everyMs: 24 * 3_600_000 } },
  })
  // The bare route's fixed 302 inside the service's process (its hooks, logger and heap): what the service costs
  // any route, apart from the redirect's own work. Only in this benchmark.
  // At `warn`, as the visitor routes log: no request lines.
  app.get('/fixed/:slug', { logLevel: 'warn' }, (_request, reply) => {
    reply.code(302).header('location', 'https://example.com/landing').send()
  })
}
// Recording can be switched off between runs (IPC `recording off` / `recording on`), to measure what it costs.
let recording = true
if (mode !== 'bare') {
  const recorder = app.visits
  app.visits = { record: (visit) => recording && recorder.record(visit) }
}
const loopDelay = monitorEventLoopDelay({ resolution: 10 })
loopDelay.enable()
// Per run (IPC `run start`): how long the event loop was held up, and by the garbage collector's pauses; what a
// visitor's latency is made of besides the redirect's own work.
const runLoopDelay = monitorEventLoopDelay({ resolution: 1 })
runLoopDelay.enable()
const gc = { pauses: 0, totalMs: 0, maxMs: 0 }
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gc.pauses++
    gc.totalMs += entry.duration
    gc.maxMs = Math.max(gc.maxMs, entry.duration)
  }
}).observe({ entryTypes: ['gc'] })
const startRss = process.memoryUsage().rss

await app.listen({ port: 0, host: '127.0.0.1' })
let maxRss = process.memoryUsage().rss
setInterval(() => {
  maxRss = Math.max(maxRss, process.memoryUsage().rss)
}, 200).unref()

process.on('message', async (message: string) => {
  if (message === 'stats') {
    const redirects = mode === 'bare' ? null : app.redirects
    const cpu = process.cpuUsage()
    process.send!({
      cpuMicros: cpu.user + cpu.system,
      rss: process.memoryUsage().rss,
      heapTotal: process.memoryUsage().heapTotal,
      startRss,
      maxRss,
      reads: redirects?.cache.reads ?? 0,
      statements: redirects?.viewStatements() ?? 0,
      counters: redirects ? { ...redirects.counters } : null,
      visits: mode === 'bare' ? null : app.visitRecorder?.stats(),
      loopDelayMaxMs: loopDelay.max / 1e6,
      loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
      run: {
        loopDelayP99Ms: runLoopDelay.percentile(99) / 1e6,
        loopDelayMaxMs: runLoopDelay.max / 1e6,
        gcPauses: gc.pauses,
        gcTotalMs: gc.totalMs,
        gcMaxMs: gc.maxMs,
      },
    })
  } else if (message === 'run start') {
    runLoopDelay.reset()
    Object.assign(gc, { pauses: 0, totalMs: 0, maxMs: 0 })
    process.send!({ reset: true })
  } else if (message === 'rollup') {
    // What the run recorded, written and then summed into the aggregates, as the minute's rollup would.
    const started = performance.now()
    await app.visitRecorder!.flush()
    const flushed = performance.now()
    const { visits } = await app.visitRollup.run(new Date())
    process.send!({ flushMs: flushed - started, rollupMs: performance.now() - flushed, visits })
  } else if (message === 'recording on' || message === 'recording off') {
    recording = message === 'recording on'
    process.send!({ recording })
  } else if (message === 'stop') {
    await app.close()
    for (const teardown of teardowns) await teardown()
    process.exit(0)
  }
})
process.send!({ port: (app.server.address() as { port: number }).port, cacheEntries })
