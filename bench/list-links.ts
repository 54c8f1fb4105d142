/**
 * The cost of GET /v1/links at scale: a workspace of 100,000 links (another holds 5,000), 200 requests of
 * limit=100 per case through the real app (app.inject: routing, auth, query, serialization), median and p99,
 * then the plan PostgreSQL chose for the very SQL Prisma sent (EXPLAIN ANALYZE).
 *
 *   npx tsx bench/list-links.ts
 *
 * DATABASE_URL names the PostgreSQL server (default postgresql://postgres@127.0.0.1:5432/test); a throwaway
 * database is created on it and dropped at the end.
 */
import { availableParallelism, loadavg } from 'node:os'
import pg from 'pg'
import { buildApp } from '../src/app.js'
import { createWorkspaceToken, testConfig } from '../test/support/test-app.js'
import { openBenchDatabase, percentile } from './support/bench-database.js'

const LINKS = 100_000
const OTHER_LINKS = 5_000
const RUNS = 200
const WARMUP = 20

/** Links of one workspace in a single INSERT … SELECT: every 10th tagged promo, every 1000th rare, every 5th with a pixel. */
async function seed(sql: pg.Client, workspaceId: number, domain: string, count: number, offset: number): Promise<void> {
  await sql.query(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "title", "tags", "tagKeys", "createdAt", "updatedAt")
     SELECT $1, $2, 'l' || g, 'l' || g, 'https://example.com/page/' || g, 'Link number ' || g,
            CASE WHEN g % 1000 = 0 THEN ARRAY['Promo', 'Email', 'Rare'] WHEN g % 10 = 0 THEN ARRAY['Promo', 'Email']
                 WHEN g % 3 = 0 THEN ARRAY['Email'] ELSE ARRAY[]::text[] END,
            CASE WHEN g % 1000 = 0 THEN ARRAY['promo', 'email', 'rare'] WHEN g % 10 = 0 THEN ARRAY['promo', 'email']
                 WHEN g % 3 = 0 THEN ARRAY['email'] ELSE ARRAY[]::text[] END,
            now() - make_interval(secs => $3 - g), now() - make_interval(secs => $3 - g)
     FROM generate_series($4::int, $3::int) AS g`,
    [workspaceId, domain, offset + count, offset + 1],
  )
  const pixel = await sql.query<{ id: string }>(
    `INSERT INTO "Pixel" ("id", "workspaceId", "platform", "value") VALUES (gen_random_uuid(), $1, 'ga', $2)
     ON CONFLICT ("workspaceId", "platform", "value") DO UPDATE SET "title" = NULL RETURNING "id"`,
    [workspaceId, `UA-${workspaceId}`],
  )
  await sql.query(
    `INSERT INTO "LinkPixel" ("linkUniq", "pixelId", "position")
     SELECT "uniq", $2, 0 FROM "Link" WHERE "workspaceId" = $1 AND "uniq" % 5 = 0
     ON CONFLICT DO NOTHING`,
    [workspaceId, pixel.rows[0].id],
  )
}

const bench = await openBenchDatabase('bench_list')
const { database, queries, url } = bench
const { prisma } = database
try {
  const token = await createWorkspaceToken(prisma, { workspace: 'bench', defaultDomain: 'go.bench.test' })
  const otherToken = await createWorkspaceToken(prisma, { workspace: 'other', defaultDomain: 'go.other.test' })
  const ids = Object.fromEntries((await prisma.workspace.findMany()).map((w) => [w.name, w.id]))

  const sql = new pg.Client({ connectionString: url })
  sql.on('error', () => {})
  await sql.connect()
  let started = performance.now()
  // The other workspace's links before and after, so the two workspaces' uniqs interleave as in real life.
  await seed(sql, ids.other, 'go.other.test', OTHER_LINKS / 2, 0)
  await seed(sql, ids.bench, 'go.bench.test', LINKS, OTHER_LINKS)
  await seed(sql, ids.other, 'go.other.test', OTHER_LINKS / 2, OTHER_LINKS + LINKS)
  // VACUUM too: it moves the GIN index's pending entries (fastupdate) into the index, as autovacuum would.
  await sql.query('VACUUM ANALYZE')
  console.log(`seeded ${LINKS} + ${OTHER_LINKS} links in ${((performance.now() - started) / 1000).toFixed(1)} s`)

  const config = testConfig({ DATABASE_URL: url })
  const app = await buildApp({ config, database, logger: false })
  await app.ready()

  const { rows: range } = await sql.query<{ low: number; high: number }>(
    'SELECT min("uniq") AS low, max("uniq") AS high FROM "Link" WHERE "workspaceId" = $1',
    [ids.bench],
  )
  const cursorAt = (uniq: number) => Buffer.from(JSON.stringify({ u: uniq })).toString('base64url')
  // Deep pages: positions spread over the whole workspace, the same ones on every run of the benchmark.
  const deep = (i: number) => cursorAt(range[0].low + 200 + Math.floor(((i * 7919) % RUNS) / RUNS * (range[0].high - range[0].low - 200)))
  const cases: [string, (i: number) => string, string?][] = [
    ['first page', () => '/v1/links?limit=100'],
    ['deep pages (cursor)', (i) => `/v1/links?limit=100&cursor=${deep(i)}`],
    ['tag=promo, first page', () => '/v1/links?limit=100&tag=promo'],
    ['tag=promo, deep pages', (i) => `/v1/links?limit=100&tag=promo&cursor=${deep(i)}`],
    ['tags promo+email, createdAfter', () => `/v1/links?limit=100&tag=promo&tag=email&createdAfter=2000-01-01T00:00:00Z`],
    ['tag=rare (1 link in 1000: the GIN index)', () => '/v1/links?limit=100&tag=rare'],
    ['q=page/9999 (rare match: scans)', () => '/v1/links?limit=100&q=page/9999'],
    [`the other workspace (${OTHER_LINKS} links), first page`, () => '/v1/links?limit=100', otherToken],
    // The worst shape for the list: the next links of the other workspace lie under all 100,000 of the big one's.
    // PostgreSQL, assuming a workspace's links spread evenly, would walk the primary key through them rather than
    // take the (workspaceId, uniq DESC) index; the unfiltered page takes its uniqs from that index alone
    // (findWorkspacePage). A filtered page of that shape still may: shown here rather than hidden.
    [`the other workspace, past the big one's links`, () => `/v1/links?limit=100&cursor=${cursorAt(range[0].high + 1)}`, otherToken],
  ]

  console.log(`\nGET /v1/links, ${RUNS} requests per case after ${WARMUP} warm-up ones (${LINKS} links in the workspace)`)
  // Figures from a busy machine are not comparable with an idle one's: say which it was.
  console.log(`${availableParallelism()} CPUs, load average ${loadavg().map((load) => load.toFixed(2)).join(' ')}`)
  console.log('case'.padEnd(50), 'median ms'.padStart(10), 'p99 ms'.padStart(10), 'links'.padStart(7))
  const plans: [string, { query: string; params: string }][] = []
  for (const [label, path, caseToken = token] of cases) {
    const headers = { 'api-authorization': caseToken }
    for (let i = 0; i < WARMUP; i++) await app.inject({ method: 'GET', url: path(i), headers })
    const times: number[] = []
    let returned = 0
    for (let i = 0; i < RUNS; i++) {
      queries.length = 0
      started = performance.now()
      const response = await app.inject({ method: 'GET', url: path(i), headers })
      times.push(performance.now() - started)
      if (response.statusCode !== 200) throw new Error(`${path(i)} answered ${response.statusCode}: ${response.body}`)
      returned = response.json().links.length
    }
    times.sort((a, b) => a - b)
    console.log(label.padEnd(50), percentile(times, 50).toFixed(2).padStart(10), percentile(times, 99).toFixed(2).padStart(10), String(returned).padStart(7))
    // The list query of the last request: the one that reads "Link" in uniq order.
    const listQuery = queries.find((q) => /FROM "Link"/.test(q.query) && /ORDER BY/.test(q.query))
    if (!listQuery) throw new Error(`${label}: no list statement among the ${queries.length} sent (has the list's SQL changed?)`)
    plans.push([label, listQuery])
  }

  for (const [label, { query, params }] of plans) {
    const values = JSON.parse(params) as unknown[]
    const { rows } = await sql.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${query}`, values)
    console.log(`\n-- ${label}\n-- ${query}\n-- params ${params}`)
    for (const row of rows) console.log(row['QUERY PLAN'])
  }
  await sql.end()
  await app.close()
} finally {
  await bench.drop()
}
