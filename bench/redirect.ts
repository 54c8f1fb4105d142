/**
 * Plain redirects under load (`npm run bench:redirect`): the real service (bench/redirect-server.ts, over 10,000
 * links, PostgreSQL from DATABASE_URL else an in-memory PGlite, Redis from REDIS_URL if set) beside a bare
 * Fastify route answering a fixed 302, each in its own process, loaded by autocannon over loopback with the same
 * mix of addresses: 90% warm (1,000 links visited often), 9% cold (the other 9,000 in turn, through a cache of
 * 2,000 entries, so each is read from the database), 1% unknown (a new random slug each time). Prints, for
 * each, requests/s and p50/p99 latency at full rate, the ratio, p50/p99 at half of the peak rate (autocannon's
 * overallRate), the service's RSS and its database reads per visit.
 *
 * Options (environment): BENCH_DURATION (s per run, default 10), BENCH_CONNECTIONS (default 50),
 * BENCH_CACHE_ENTRIES (default 2000), BENCH_SERVICE_ARGS (extra node flags for the service, e.g. --cpu-prof).
 */
import autocannon from 'autocannon'
import { execFileSync, fork, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { get, type IncomingMessage } from 'node:http'
import { fileURLToPath } from 'node:url'

const DURATION = Number(process.env.BENCH_DURATION ?? 10)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const HOT = 1000
const LINKS = 10_000
const USER_AGENT = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36'

interface Server {
  child: ChildProcess
  port: number
  cacheEntries?: number
}

const projectRoot = fileURLToPath(new URL('../', import.meta.url))

/**
 * The servers run compiled, as `npm start` runs the service: under tsx a process holds its loader too (about
 * 35 MB more RSS) and runs code that is not quite what production runs.
 */
function compile(): string {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.json', '--tsBuildInfoFile', 'dist/.tsbuildinfo.bench'], { cwd: projectRoot, stdio: 'inherit' })
  return `${projectRoot}dist/bench/redirect-server.js`
}

async function start(script: string, mode: 'service' | 'bare'): Promise<Server> {
  const flags = mode === 'service' ? (process.env.BENCH_SERVICE_ARGS ?? '').split(' ').filter(Boolean) : []
  const child = fork(script, [mode], { execArgv: flags, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  const [message] = (await once(child, 'message')) as [{ port: number; cacheEntries: number }]
  return { child, ...message }
}

async function ask<T>(server: Server, question: string): Promise<T> {
  server.child.send(question)
  const [answer] = await once(server.child, 'message')
  return answer as T
}

async function stop(server: Server): Promise<void> {
  const exited = once(server.child, 'exit')
  server.child.send('stop')
  await exited
}

/** 90% of the 1,000 hot links, 9% the next of the other 9,000 in turn, 1% a slug nobody made. */
let coldCursor = 0
function nextPath(): string {
  const draw = Math.random()
  if (draw < 0.9) return `/l${1 + Math.floor(Math.random() * HOT)}`
  if (draw < 0.99) {
    coldCursor = (coldCursor + 1) % (LINKS - HOT)
    return `/l${HOT + 1 + coldCursor}`
  }
  return `/u${randomBytes(6).toString('hex')}`
}

async function load(server: Server, seconds: number, overallRate?: number) {
  const result = await autocannon({
    url: `http://127.0.0.1:${server.port}`,
    connections: CONNECTIONS,
    duration: seconds,
    overallRate,
    headers: { host: 'go.bench.test', 'user-agent': USER_AGENT },
    requests: [{ method: 'GET', setupRequest: (request) => ({ ...request, path: nextPath() }) }],
  })
  const answered = result['2xx'] + result['3xx'] + result['4xx']
  if (result.errors || result.timeouts || result['5xx'] || result.non2xx !== result['3xx'] + result['4xx']) {
    throw new Error(`errors ${result.errors}, timeouts ${result.timeouts}, 5xx ${result['5xx']}`)
  }
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, answered, redirects: result['3xx'] }
}

const fmt = (n: number, digits = 0) => n.toFixed(digits).padStart(8)

async function main() {
  console.log('compiling (tsc)…')
  const script = compile()
  const bare = await start(script, 'bare')
  const service = await start(script, 'service')
  console.log(
    `database: ${process.env.DATABASE_URL ? 'PostgreSQL (DATABASE_URL)' : 'in-memory PGlite'}; Redis: ${process.env.REDIS_URL ?? 'none'}; ` +
      `${LINKS} links, cache of ${service.cacheEntries} entries; autocannon ${CONNECTIONS} connections, ${DURATION} s per run`,
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

  const readsBefore = (await ask<{ reads: number }>(service, 'stats')).reads
  const full = { bare: await load(bare, DURATION), service: await load(service, DURATION) }
  const afterFull = await ask<{ reads: number; maxRss: number; counters: Record<string, number> }>(service, 'stats')
  const half = {
    bare: await load(bare, DURATION, Math.floor(full.bare.rps / 2)),
    service: await load(service, DURATION, Math.floor(full.service.rps / 2)),
  }
  const stats = await ask<{ rss: number; maxRss: number }>(service, 'stats')

  console.log('')
  console.log('                 full rate                      half of its peak rate')
  console.log('              req/s    p50 ms    p99 ms       req/s    p50 ms    p99 ms')
  for (const name of ['bare', 'service'] as const) {
    const f = full[name]
    const h = half[name]
    console.log(`${name.padEnd(8)} ${fmt(f.rps)}  ${fmt(f.p50, 2)}  ${fmt(f.p99, 2)}    ${fmt(h.rps)}  ${fmt(h.p50, 2)}  ${fmt(h.p99, 2)}`)
  }
  console.log('')
  console.log(`service / bare throughput: ${((100 * full.service.rps) / full.bare.rps).toFixed(1)}% (target ≥ 70%)`)
  console.log(`service p99 at half its peak rate: ${half.service.p99.toFixed(2)} ms (target < 5 ms)`)
  console.log(`service RSS: ${(stats.rss / 2 ** 20).toFixed(0)} MB now, ${(stats.maxRss / 2 ** 20).toFixed(0)} MB at most (target < 200 MB)`)
  const visits = full.service.answered
  console.log(
    `database reads per visit at full rate: ${((afterFull.reads - readsBefore) / visits).toFixed(3)} ` +
      `(expected about 0.10: 9% cold + 1% unknown); answers since start: ${JSON.stringify(afterFull.counters)}`,
  )
  await stop(bare)
  await stop(service)
}

await main()
