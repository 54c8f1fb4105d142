/**
 * The servers of `npm run bench` (bench/api.ts), each in a process of its own so that its CPU and memory are its
 * own:
 *
 * - `service`: the real app (real HTTP on loopback, its production logger at LOG_LEVEL=info, quotas in Redis when
 *   REDIS_URL is set) on a database of its own, with a workspace whose default domain is go.bench.test, quotas too
 *   large to be reached, a folder, 10,000 links to read and update and BENCH_DELETABLE more to delete;
 * - `bare`: a Fastify process with one route per reference, each sending the one pg statement it stands for
 *   (single-row INSERT … RETURNING, UPDATE … RETURNING, SELECT by key, SELECT of 20) to the service's own tables
 *   (its migrations: the same columns, keys, indexes and foreign keys, and the same seeded links), prepared (a
 *   named statement, as the service sends its hot ones), on a pool of 10 (the service's size), and a fixed answer.
 *
 * Every pg statement either process sends is counted (pg's Client.query, which Prisma's adapter, the raw queries
 * and the transactions all go through). The parent talks to it over IPC: the set-up once listening, then `stats`
 * (CPU, RSS, peak RSS, statements) and `stop`.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import { writeFile } from 'node:fs/promises'
import { Session } from 'node:inspector/promises'
import { buildApp, loggerOptions } from '../src/app.js'
import { createFolder } from '../src/workspaces/workspace-repository.js'
import { benchConfig, seedWorkspace } from './support/bench-service.js'
import { openDatabase } from '../src/db/database.js'
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
  // A database of its own, dropped at the end, with the service's tables (its migrations) and the same links.
  const { url, drop } = await createScratchDatabase(serverUrl, 'bench_bare')
  const database = await openDatabase({ databaseUrl: url, dataDir: 'unused' })
  const { workspaceId, firstLink } = await seedWorkspace(database, { name: 'bench', domain: BENCH_DOMAIN, count: LINKS + DELETABLE })
  await database.close()
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  pool.on('error', () => {})
  teardowns.push(async () => {
    await pool.end()
    await drop()
  })
  /** A named statement: parsed and planned once per connection, as the service's hot statements are. */
  const prepared = async (name: string, text: string, values: unknown[]) => (await pool.query({ name, text, values })).rows
  const slug = () => randomBytes(5).toString('hex')
  app = Fastify()
  app.post('/insert', async (request, reply) => {
    const s = slug()
    const [row] = await prepared(
      'insert',
      `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt") VALUES ($1, $2, $3, $4, $5, now()) RETURNING *`,
      [workspaceId, BENCH_DOMAIN, s, s, (request.body as { link: { url: string } }).link.url],
    )
    return reply.code(201).send(row)
  })
  app.put('/update/:uniq', async (request) => {
    const [row] = await prepared('update', `UPDATE "Link" SET "title" = $2, "updatedAt" = now() WHERE "uniq" = $1 RETURNING *`, [
      Number((request.params as { uniq: string }).uniq),
      (request.body as { link: { title: string } }).link.title,
    ])
    return row
  })
  app.get('/select/:uniq', async (request) => {
    const [row] = await prepared('select', `SELECT * FROM "Link" WHERE "uniq" = $1 AND "workspaceId" = $2`, [
      Number((request.params as { uniq: string }).uniq),
      workspaceId,
    ])
    return row
  })
  app.get('/list', async () => {
    const links = await prepared('list', `SELECT * FROM "Link" WHERE "workspaceId" = $1 ORDER BY "uniq" DESC LIMIT 20`, [workspaceId])
    return { links }
  })
  app.delete('/delete/:uniq', async (request, reply) => {
    await prepared('delete', `DELETE FROM "Link" WHERE "uniq" = $1 AND "workspaceId" = $2`, [Number((request.params as { uniq: string }).uniq), workspaceId])
    return reply.code(204).send()
  })
  app.get('/fixed', async () => ({ status: 'ok' }))
  setup = { firstLink, firstDeletable: firstLink + LINKS, deletable: DELETABLE }
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

let profiler: Session | undefined
process.on('message', async (message: string) => {
  if (message === 'stats') {
    const cpu = process.cpuUsage()
    const memory = process.memoryUsage()
    maxRss = Math.max(maxRss, memory.rss)
    process.send!({ cpuMicros: cpu.user + cpu.system, rss: memory.rss, heapUsed: memory.heapUsed, startRss, maxRss, statements })
  } else if (message === 'profile start') {
    // BENCH_PROFILE_DIR: one scenario's run alone, not the start-up and warm-up a --cpu-prof profile holds too.
    profiler ??= new Session()
    profiler.connect()
    await profiler.post('Profiler.enable')
    await profiler.post('Profiler.start')
    process.send!({ profiling: true })
  } else if (message.startsWith('profile stop ')) {
    const { profile } = await profiler!.post('Profiler.stop')
    profiler!.disconnect()
    const file = message.slice('profile stop '.length)
    await writeFile(file, JSON.stringify(profile))
    process.send!({ file })
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
