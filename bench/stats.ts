/**
 * The cost of the stats routes at scale, through the real app (app.inject): one link with 1,000,000 visits over
 * 90 days, and a workspace of 100,000 links with 5,000,000 visits spread Zipf-like (a few links get most of
 * them). Visits go in through storeVisits, the recorder's own way in, in batches of 10,000. Then median and
 * p99 per case, and the EXPLAIN ANALYZE of the slowest statement of the slowest case.
 *
 *   npm run bench:stats
 *
 * DATABASE_URL names the PostgreSQL server (default postgresql://postgres@127.0.0.1:5432/test); a throwaway
 * database is created on it and dropped at the end. BENCH_LINK_VISITS, BENCH_WORKSPACE_VISITS, BENCH_LINKS and
 * BENCH_RUNS scale it down (or up). BENCH_KEEP_DATABASE=1 keeps the database; BENCH_DATABASE=<its name> runs the
 * cases again on it without loading (migrations are applied first, so a new one is measured on the same data).
 */
import { availableParallelism, loadavg } from 'node:os'
import pg from 'pg'
import { storeVisits, type StoredVisit } from '../src/analytics/visit-store.js'
import { SESSION_OPTIONS, type Database } from '../src/db/database.js'
import { buildApp } from '../src/app.js'
import { createWorkspaceToken, testConfig } from '../test/support/test-app.js'
import { createToken } from '../src/workspaces/workspace-repository.js'
import { openBenchDatabase, percentile } from './support/bench-database.js'

const LINK_VISITS = Number(process.env.BENCH_LINK_VISITS ?? 1_000_000)
const WORKSPACE_VISITS = Number(process.env.BENCH_WORKSPACE_VISITS ?? 5_000_000)
const LINKS = Number(process.env.BENCH_LINKS ?? 100_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 50)
const WARMUP = 5
const BATCH = 10_000
const DAYS = 90
const END = Date.parse('2026-11-20T00:00:00Z')
const START = END - DAYS * 86_400_000

/** A deterministic generator (mulberry32), so that every run stores the same visits. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const rand = random(42)

/** Picks from [value, weight] pairs. */
function weighted<T>(pairs: [T, number][]): () => T {
  const total = pairs.reduce((sum, [, weight]) => sum + weight, 0)
  const cumulative: number[] = []
  let sum = 0
  for (const [, weight] of pairs) cumulative.push((sum += weight / total))
  return () => {
    const r = rand()
    let low = 0
    let high = cumulative.length - 1
    while (low < high) {
      const mid = (low + high) >> 1
      if (cumulative[mid] < r) low = mid + 1
      else high = mid
    }
    return pairs[low][0]
  }
}

const country = weighted<string | null>([
  ['US', 30], ['DE', 8], ['GB', 7], ['FR', 6], ['IN', 6], ['BR', 5], ['CA', 4], ['JP', 3], ['ES', 3], ['IT', 3],
  ['NL', 2], ['AU', 2], ['MX', 2], ['PL', 2], ['SE', 1], ['CH', 1], ['BE', 1], ['AT', 1], ['TR', 1], ['KR', 1],
  ['ID', 1], ['AR', 1], ['ZA', 1], ['NG', 1], ['PT', 1], ['IE', 1], ['DK', 1], ['NO', 1], ['FI', 1], [null, 3],
])
const referrer = weighted<string | null>([
  [null, 40], ['www.google.com', 15], ['t.co', 10], ['www.facebook.com', 8], ['www.linkedin.com', 6], ['www.reddit.com', 4],
  ['news.ycombinator.com', 3], ['mail.google.com', 3], ['www.bing.com', 2], ['duckduckgo.com', 2], ['l.instagram.com', 2],
  ['www.youtube.com', 2], ['slack.com', 1], ['teams.microsoft.com', 1], ['medium.com', 1],
])
const platform = weighted<[string, string | null, string | null]>([
  [['desktop', 'Windows', 'Chrome'], 25], [['desktop', 'Windows', 'Edge'], 8], [['desktop', 'macOS', 'Safari'], 8],
  [['desktop', 'macOS', 'Chrome'], 8], [['desktop', 'Linux', 'Firefox'], 3], [['mobile', 'iOS', 'Safari'], 20],
  [['mobile', 'Android', 'Chrome'], 18], [['mobile', 'Android', 'Samsung Internet'], 4], [['tablet', 'iOS', 'Safari'], 3],
  [['tv', null, null], 1], [['mobile', null, null], 2],
])
const destination = weighted<[string, StoredVisit['reason']]>([
  [['https://example.com/landing', 'default'], 70], [['https://example.com/landing-b', 'rotator'], 20], [['https://example.de/start', 'geolocation'], 10],
])
const BOT_SHARE = 0.05
/** A pool of visitors large enough that most are seen on a few days only. */
const VISITORS = 300_000

function makeVisit(linkUniq: number, workspaceId: number, domain: string): StoredVisit {
  const isBot = rand() < BOT_SHARE
  const [device, os, browser] = isBot ? ['bot', null, null] : platform()
  const [dest, reason] = destination()
  return {
    at: new Date(START + Math.floor(rand() * (END - START))),
    linkUniq,
    workspaceId,
    domain,
    country: country(),
    referrerHost: isBot ? null : referrer(),
    device,
    os,
    browser,
    destination: dest,
    reason,
    answer: isBot ? 'crawler' : 'redirect',
    bot: isBot,
    visitor: String(Math.floor(rand() * VISITORS) + 1),
  }
}

/**
 * Visits in time order batch by batch, as the recorder sends them: each batch covers the next slice of the
 * 90 days, so SeenToday and the aggregates grow the way they do in production.
 */
async function store(database: Database, count: number, pick: () => { uniq: number; workspaceId: number; domain: string }, label: string) {
  const started = performance.now()
  for (let done = 0; done < count; done += BATCH) {
    const size = Math.min(BATCH, count - done)
    const sliceStart = START + ((END - START) * done) / count
    const sliceLength = ((END - START) * size) / count
    const batch: StoredVisit[] = []
    for (let i = 0; i < size; i++) {
      const link = pick()
      const visit = makeVisit(link.uniq, link.workspaceId, link.domain)
      visit.at = new Date(sliceStart + Math.floor(rand() * sliceLength))
      batch.push(visit)
    }
    await storeVisits(database, batch)
    if ((done / BATCH) % 50 === 49) console.log(`  ${label}: ${done + size} visits, ${((performance.now() - started) / 1000).toFixed(0)} s`)
  }
  const seconds = (performance.now() - started) / 1000
  console.log(`${label}: ${count} visits through storeVisits in ${seconds.toFixed(1)} s (${Math.round(count / seconds)}/s)`)
}

/** Zipf (s = 1) over ranks 1..n by inverse CDF: rank 1 gets about 8% of the visits of 100,000 links. */
function zipf(n: number): () => number {
  const cumulative = new Float64Array(n)
  let sum = 0
  for (let rank = 1; rank <= n; rank++) cumulative[rank - 1] = sum += 1 / rank
  return () => {
    const r = rand() * sum
    let low = 0
    let high = n - 1
    while (low < high) {
      const mid = (low + high) >> 1
      if (cumulative[mid] < r) low = mid + 1
      else high = mid
    }
    return low
  }
}

/** The two workspaces, their links and their visits. */
async function load(sql: pg.Client) {
  await createWorkspaceToken(prisma, { workspace: 'bench', defaultDomain: 'go.bench.test' })
  await createWorkspaceToken(prisma, { workspace: 'big', defaultDomain: 'go.big.test' })
  const ids = Object.fromEntries((await prisma.workspace.findMany()).map((w) => [w.name, w.id]))

  // (a) One link, alone in its workspace.
  const [{ uniq: hot }] = (await sql.query<{ uniq: number }>(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt")
     VALUES ($1, 'go.bench.test', 'hot', 'hot', 'https://example.com/landing', now()) RETURNING "uniq"`,
    [ids.bench],
  )).rows
  await store(database, LINK_VISITS, () => ({ uniq: hot, workspaceId: ids.bench, domain: 'go.bench.test' }), 'one link')

  // (b) 100,000 links, every 10th tagged promo, every 20th in a folder (none of them tagged); visits Zipf-like over them.
  const [{ id: folder }] = (await sql.query<{ id: number }>(`INSERT INTO "Folder" ("workspaceId", "name") VALUES ($1, 'bench') RETURNING "id"`, [ids.big])).rows
  await sql.query(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "tags", "tagKeys", "folderId", "updatedAt")
     SELECT $1, 'go.big.test', 'l' || g, 'l' || g, 'https://example.com/page/' || g,
            CASE WHEN g % 10 = 0 THEN ARRAY['Promo'] ELSE ARRAY[]::text[] END,
            CASE WHEN g % 10 = 0 THEN ARRAY['promo'] ELSE ARRAY[]::text[] END,
            CASE WHEN g % 20 = 7 THEN $3::int END, now()
     FROM generate_series(1, $2::int) AS g`,
    [ids.big, LINKS, folder],
  )
  const uniqs = (await sql.query<{ uniq: number }>('SELECT "uniq" FROM "Link" WHERE "workspaceId" = $1 ORDER BY "uniq"', [ids.big])).rows.map((row) => row.uniq)
  // Ranks are shuffled over the links, so that popular links are not all tagged or all untagged.
  const order = uniqs.map((uniq) => ({ uniq, key: rand() })).sort((a, b) => a.key - b.key).map((entry) => entry.uniq)
  const rank = zipf(order.length)
  await store(database, WORKSPACE_VISITS, () => ({ uniq: order[rank()], workspaceId: ids.big, domain: 'go.big.test' }), 'workspace')
  await sql.query('VACUUM ANALYZE')
}

const bench = await openBenchDatabase('bench_stats')
const { database, queries, url } = bench
const { prisma } = database
try {
  const sql = new pg.Client({ connectionString: url, options: SESSION_OPTIONS })
  sql.on('error', () => {})
  await sql.connect()
  if (!bench.reused) await load(sql)
  const token = (await createToken(prisma, { workspace: 'bench' })).token
  const bigToken = (await createToken(prisma, { workspace: 'big' })).token
  const [{ uniq: hot }] = (await sql.query<{ uniq: number }>(`SELECT "uniq" FROM "Link" WHERE "slug" = 'hot'`)).rows
  const [{ id: folder }] = (await sql.query<{ id: number }>(`SELECT "id" FROM "Folder" WHERE "name" = 'bench'`)).rows
  const sizes = await sql.query<{ table: string; rows: string }>(
    `SELECT relname AS "table", reltuples::int8::text AS "rows" FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'analytics' AND c.relkind IN ('r', 'p') AND relname IN ('LinkHourly', 'WorkspaceHourly', 'GroupHourly', 'LinkDaily', 'WorkspaceDaily', 'GroupDaily') ORDER BY 1`,
  )
  console.log(sizes.rows.map((row) => `${row.table}: ${row.rows} rows`).join(', '))

  const app = await buildApp({ config: testConfig({ DATABASE_URL: url }), database, logger: false })
  await app.ready()

  const range = (days: number) => `from=${new Date(END - days * 86_400_000).toISOString()}&to=${new Date(END).toISOString()}`
  const cases: [string, string, string][] = [
    ['link, 90 days by day', `/v1/links/${hot}/stats?${range(90)}`, token],
    ['link, 90 days by day, Europe/Paris', `/v1/links/${hot}/stats?${range(90)}&timezone=Europe/Paris`, token],
    ['link, 30 days by hour', `/v1/links/${hot}/stats?${range(30)}&interval=hour`, token],
    ['link, visits, first page of 100', `/v1/links/${hot}/visits`, token],
    ['workspace, 30 days by day', `/v1/stats?${range(30)}`, bigToken],
    ['workspace, 90 days by day', `/v1/stats?${range(90)}`, bigToken],
    ['workspace, 90 days, domain', `/v1/stats?${range(90)}&domain=go.big.test`, bigToken],
    ['workspace, 30 days, tag=promo (10% of links)', `/v1/stats?${range(30)}&tag=promo`, bigToken],
    ['workspace, 90 days, tag=promo', `/v1/stats?${range(90)}&tag=promo`, bigToken],
    ['workspace, 30 days, tag=promo, domain', `/v1/stats?${range(30)}&tag=promo&domain=go.big.test`, bigToken],
    ['workspace, 30 days, folderId (5% of links)', `/v1/stats?${range(30)}&folderId=${folder}`, bigToken],
    ['workspace, 90 days, folderId', `/v1/stats?${range(90)}&folderId=${folder}`, bigToken],
    ['list, 100 links with clicks', '/v1/links?limit=100', bigToken],
  ]
  console.log(`\n${RUNS} requests per case after ${WARMUP} warm-up ones`)
  console.log(`${availableParallelism()} CPUs, load average ${loadavg().map((load) => load.toFixed(2)).join(' ')}`)
  console.log('case'.padEnd(48), 'median ms'.padStart(10), 'p99 ms'.padStart(10))
  let slowest = { label: '', median: 0, statement: undefined as { query: string; params: string; duration: number } | undefined }
  for (const [label, path, caseToken] of cases) {
    const headers = { 'api-authorization': caseToken }
    for (let i = 0; i < WARMUP; i++) await app.inject({ method: 'GET', url: path, headers })
    const times: number[] = []
    for (let i = 0; i < RUNS; i++) {
      queries.length = 0
      const started = performance.now()
      const response = await app.inject({ method: 'GET', url: path, headers })
      times.push(performance.now() - started)
      if (response.statusCode !== 200) throw new Error(`${path} answered ${response.statusCode}: ${response.body}`)
    }
    times.sort((a, b) => a - b)
    const median = percentile(times, 50)
    console.log(label.padEnd(48), median.toFixed(1).padStart(10), percentile(times, 99).toFixed(1).padStart(10))
    if (median > slowest.median) {
      const statement = [...queries].sort((a, b) => b.duration - a.duration)[0]
      slowest = { label, median, statement }
    }
  }
  if (slowest.statement) {
    const { query, params } = slowest.statement
    const { rows } = await sql.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${query}`, JSON.parse(params) as unknown[])
    console.log(`\n-- the slowest statement of the slowest case (${slowest.label})\n-- ${query.replace(/\s+/g, ' ')}\n-- params ${params}`)
    for (const row of rows) console.log(row['QUERY PLAN'])
  }
  await sql.end()
  await app.close()
} finally {
  await bench.drop()
}
