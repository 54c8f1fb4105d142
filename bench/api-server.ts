/**
 * The servers of `npm run bench` (bench/api.ts), each in a process of its own so that its CPU and memory are its
 * own:
 *
 * - `service`: the real app (real HTTP on loopback, its production logger at LOG_LEVEL=info, quotas in Redis when
 *   REDIS_URL is set) on a database of its own, with a workspace whose default domain is go.bench.test, quotas too
 *   large to be reached, a folder, 10,000 links to read and update and BENCH_DELETABLE more to delete;
 * - `bare`: a Fastify process with one route per reference, each sending the one pg statement it stands for
 *   (single-row INSERT … RETURNING, UPDATE … RETURNING, SELECT by key, SELECT of 20) to a table like the links'
 *   on a pool of 10 (the service's size), and a fixed answer.
 *
 * Every pg statement either process sends is counted (pg's Client.query, which Prisma's adapter, the raw queries
 * and the transactions all go through). The parent talks to it over IPC: the set-up once listening, then `stats`
 * (CPU, RSS, peak RSS, statements) and `stop`.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import { buildApp, loggerOptions } from '../src/app.js'
import { createFolder } from '../src/workspaces/workspace-repository.js'
import { benchConfig, seedWorkspace } from './support/bench-service.js'
import { createScratchDatabase } from '../test/support/scratch-database.js'
import { openTestDatabase } from '../test/support/test-app.js'

export const BENCH_DOMAIN = 'go.bench.test'
/** Links read, listed and updated. */
export const LINKS = 10_000

const mode = process.argv[2]
const DELETABLE = Number(process.env.BENCH_DELETABLE ?? 100_000)
const teardowns: (() => unknown)[] = []
let app: FastifyInstance
let setup: Record<string, unknown> = {}

let statements = 0
const clientQuery = pg.Client.prototype.query
pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
  statements++
  return (clientQuery as (...a: unknown[]) => unknown).apply(this, args)
} as typeof clientQuery

const serverUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test'

if (mode === 'bare') {
  // A database of its own, dropped at the end.
  const { url, drop } = await createScratchDatabase(serverUrl, 'bench_bare')
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  pool.on('error', () => {})
  teardowns.push(async () => {
    await pool.end()
    await drop()
  })
  // The columns of a link that a plain create fills, and the same unique key and list index.
  await pool.query(`CREATE TABLE "Link" (
    "uniq" serial PRIMARY KEY, "workspaceId" int NOT NULL, "domain" text NOT NULL, "slug" text NOT NULL,
    "slugKey" text NOT NULL, "url" text NOT NULL, "title" text, "tags" text[] NOT NULL DEFAULT '{}',
    "createdAt" timestamptz NOT NULL DEFAULT now(), "updatedAt" timestamptz NOT NULL)`)
  await pool.query(`CREATE UNIQUE INDEX ON "Link" ("domain", "slugKey")`)
  await pool.query(`CREATE INDEX ON "Link" ("workspaceId", "uniq" DESC)`)
  await pool.query(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt")
     SELECT 1, $1, 'l' || g, 'l' || g, 'https://example.com/landing/' || g, now() FROM generate_series(1, ${LINKS + DELETABLE}) g`,
    [BENCH_DOMAIN],
  )
  await pool.query('ANALYZE "Link"')
  const slug = () => randomBytes(5).toString('hex')
  app = Fastify()
  app.post('/insert', async (request, reply) => {
    const s = slug()
    const { rows } = await pool.query(
      `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt") VALUES ($1, $2, $3, $4, $5, now()) RETURNING *`,
      [1, BENCH_DOMAIN, s, s, (request.body as { link: { url: string } }).link.url],
    )
    return reply.code(201).send(rows[0])
  })
  app.put('/update/:uniq', async (request) => {
    const { rows } = await pool.query(`UPDATE "Link" SET "title" = $2, "updatedAt" = now() WHERE "uniq" = $1 RETURNING *`, [
      Number((request.params as { uniq: string }).uniq),
      (request.body as { link: { title: string } }).link.title,
    ])
    return rows[0]
  })
  app.get('/select/:uniq', async (request) => {
    const { rows } = await pool.query(`SELECT * FROM "Link" WHERE "uniq" = $1 AND "workspaceId" = $2`, [
      Number((request.params as { uniq: string }).uniq),
      1,
    ])
    return rows[0]
  })
  app.get('/list', async () => {
    const { rows } = await pool.query(`SELECT * FROM "Link" WHERE "workspaceId" = $1 ORDER BY "uniq" DESC LIMIT 20`, [1])
    return { links: rows }
  })
  app.delete('/delete/:uniq', async (request, reply) => {
    await pool.query(`DELETE FROM "Link" WHERE "uniq" = $1 AND "workspaceId" = $2`, [Number((request.params as { uniq: string }).uniq), 1])
    return reply.code(204).send()
  })
  app.get('/fixed', async () => ({ status: 'ok' }))
  setup = { firstLink: 1, firstDeletable: LINKS + 1, deletable: DELETABLE }
} else {
  const config = benchConfig()
  const { database } = await openTestDatabase({ teardown: (fn) => teardowns.unshift(fn) })
  const { token, firstLink: first } = await seedWorkspace(database, {
    name: 'bench', domain: BENCH_DOMAIN, isDefault: true, unlimited: true, count: LINKS + DELETABLE,
  })
  const folder = await createFolder(database.prisma, { workspace: 'bench', name: 'campaigns' })
  app = await buildApp({
    config,
    database,
    logger: loggerOptions(config),
    rateLimits: { keyPrefix: `bench-${randomBytes(3).toString('hex')}:` },
    redirects: { keyPrefix: `bench-${randomBytes(3).toString('hex')}:` },
  })
  setup = { token, folderId: folder.id, firstLink: first, firstDeletable: first + LINKS, deletable: DELETABLE }
}

const startRss = process.memoryUsage().rss
await app.listen({ port: 0, host: '127.0.0.1' })
let maxRss = process.memoryUsage().rss
setInterval(() => {
  maxRss = Math.max(maxRss, process.memoryUsage().rss)
}, 100).unref()

process.on('message', async (message: string) => {
  if (message === 'stats') {
    const cpu = process.cpuUsage()
    const memory = process.memoryUsage()
    maxRss = Math.max(maxRss, memory.rss)
    process.send!({ cpuMicros: cpu.user + cpu.system, rss: memory.rss, heapUsed: memory.heapUsed, startRss, maxRss, statements })
  } else if (message === 'reset peak') {
    maxRss = process.memoryUsage().rss
    process.send!({ maxRss })
  } else if (message === 'stop') {
    await app.close()
    for (const teardown of teardowns) await teardown()
    process.exit(0)
  }
})
process.send!({ port: (app.server.address() as { port: number }).port, ...setup })
