import { spawn } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { waitFor } from '../support/polling.js'
import pg from 'pg'
import t from 'tap'
import { acquireDataDirLock } from '../../src/db/data-dir-lock.js'
import { MIGRATION_PING_EVERY_MS, openDatabase } from '../../src/db/database.js'
import { applyMigrations, readMigrations, type SqlRunner } from '../../src/db/migrate.js'
import { diffMigrationsToSchema } from '../../src/db/migration-diff.js'
import { createScratchDatabase } from '../support/scratch-database.js'
import { TcpProxy } from '../support/tcp-proxy.js'
import { openTestDatabase } from '../support/test-app.js'

t.test('schema.prisma and the committed migrations agree', async (t) => {
  const drift = await diffMigrationsToSchema()
  t.equal(drift, '', 'no SQL is needed to go from the migrations to schema.prisma; run `npm run db:diff -- <name>` after a schema change')
})

t.test('migrations are recorded in Prisma\'s table and applying them again does nothing', async (t) => {
  const { database } = await openTestDatabase(t)
  const rows = await database.prisma.$queryRawUnsafe<{ migration_name: string; checksum: string; finished_at: Date }[]>(
    'SELECT migration_name, checksum, finished_at FROM "_prisma_migrations" ORDER BY migration_name',
  )
  const committed = readMigrations()
  t.same(rows.map((row) => row.migration_name), committed.map((m) => m.name))
  t.same(rows.map((row) => row.checksum), committed.map((m) => m.checksum))
  t.ok(rows.every((row) => row.finished_at))

  const runner: SqlRunner = {
    query: (sql, params = []) => database.prisma.$queryRawUnsafe(sql, ...params),
    exec: async (sql) => {
      await database.prisma.$executeRawUnsafe(sql)
    },
  }
  t.same(await applyMigrations(runner), [], 'nothing left to apply')
})

t.test('a failing migration is rolled back and reported by name', async (t) => {
  const { database } = await openTestDatabase(t)
  const statements: string[] = []
  const runner: SqlRunner = {
    query: async (sql, params = []) => {
      statements.push(sql)
      return database.prisma.$queryRawUnsafe(sql, ...params)
    },
    exec: async (sql) => {
      statements.push(sql)
      if (sql.includes('broken_table')) throw new Error('syntax error at "BROKEN"')
    },
  }
  const bad = [{ name: '29990101000000_broken', sql: 'CREATE TABLE broken_table (BROKEN);', checksum: 'x' }]
  await t.rejects(applyMigrations(runner, bad), /Migration 29990101000000_broken failed: syntax error/)
  t.ok(statements.includes('ROLLBACK'))
  const recorded = await database.prisma.$queryRawUnsafe<unknown[]>(
    `SELECT 1 FROM "_prisma_migrations" WHERE migration_name = '29990101000000_broken'`,
  )
  t.equal(recorded.length, 0)
})

t.test('the embedded database directory is locked to one process', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'shortlinks-lock-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const release = acquireDataDirLock(dir)
  // The lock names the live parent process (pid 1 is always alive), as a server holding it would.
  writeFileSync(join(dir, 'shortlinks.lock'), '1')
  t.throws(() => acquireDataDirLock(dir), { name: 'DataDirInUseError', message: /in use by process 1/ })
  // A stale lock (its process gone) is taken over.
  writeFileSync(join(dir, 'shortlinks.lock'), '999999999')
  const again = acquireDataDirLock(dir)
  again()
  release()
})

t.test('a stale lock is taken over by one process only; a lock that names no process is stale', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'shortlinks-lock-race-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const lockFile = join(dir, 'shortlinks.lock')
  const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'])
  t.teardown(() => other.kill())
  // Two processes that both found the lock stale each remove it and create their own, one after the other: the
  // first, whose lock the second replaced, must find that out and give up.
  writeFileSync(lockFile, '999999999')
  t.throws(() => acquireDataDirLock(dir, { afterTakeover: () => writeFileSync(lockFile, String(other.pid)) }), {
    name: 'DataDirInUseError',
    message: new RegExp(`in use by process ${other.pid} .*If no such process uses it .*delete ${lockFile}`),
  })
  t.equal(readFileSync(lockFile, 'utf8'), String(other.pid), 'the other process keeps its lock')
  // Empty (caught between create and write, before this fix), garbage, 0 or negative (kill(-1) signals every process): no owner.
  for (const content of ['', 'garbage', '0', '-1']) {
    writeFileSync(lockFile, content)
    const release = acquireDataDirLock(dir)
    t.equal(readFileSync(lockFile, 'utf8'), String(process.pid), `${JSON.stringify(content)} is taken over`)
    release()
  }
})

t.test('the embedded database directory: made private; one of other files refused, an empty one taken', async (t) => {
  const parent = mkdtempSync(join(tmpdir(), 'shortlinks-dirs-'))
  t.teardown(() => rmSync(parent, { recursive: true, force: true }))
  const made = join(parent, 'made', 'data')
  const database = await openDatabase({ dataDir: made })
  await database.close()
  t.equal(statSync(made).mode & 0o777, 0o700, 'only its owner may enter it (PGlite makes its files 0666)')
  t.ok(existsSync(join(made, 'PG_VERSION')))

  const open = join(parent, 'open')
  mkdirSync(open, { mode: 0o755 })
  chmodSync(open, 0o755)
  await (await openDatabase({ dataDir: open })).close()
  t.equal(statSync(open).mode & 0o777, 0o700, 'an empty directory of wider mode is made private')

  const other = join(parent, 'other')
  mkdirSync(other)
  writeFileSync(join(other, 'notes.txt'), 'mine')
  await t.rejects(openDatabase({ dataDir: other }), /holds other files and no database \(no PG_VERSION\): set DATA_DIR to a new or empty directory/)
  t.same(readdirSync(other), ['notes.txt'], 'nothing written into it, no lock left behind')

  // A first start cut short (Ctrl-C while PGlite made its files, before PG_VERSION): the next start makes the database.
  const begun = join(parent, 'begun')
  await (await openDatabase({ dataDir: begun })).close()
  rmSync(join(begun, 'PG_VERSION'))
  writeFileSync(join(begun, 'shortlinks.lock'), '999999999')
  const again = await openDatabase({ dataDir: begun })
  t.same(await again.prisma.workspace.findMany(), [], 'a database again')
  await again.close()
  t.ok(existsSync(join(begun, 'PG_VERSION')))
})

t.test('a server that accepts the connection and never answers: the start says so within the connect timeout', async (t) => {
  const sockets = new Set<Socket>()
  const silent = createServer((socket) => void sockets.add(socket))
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    sockets.forEach((socket) => socket.destroy())
    silent.close()
  })
  const { port } = silent.address() as AddressInfo
  const began = Date.now()
  await t.rejects(openDatabase({ databaseUrl: `postgresql://postgres@127.0.0.1:${port}/test`, dataDir: 'unused' }), {
    message: 'no answer within 3 s (is the host reachable, and PostgreSQL listening there?)',
  })
  t.ok(Date.now() - began < 6000, 'at the connect timeout')
})

t.test('the embedded database keeps its data on disk across restarts', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'shortlinks-data-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const first = await openDatabase({ dataDir: dir })
  await first.prisma.workspace.create({ data: { name: 'persisted' } })
  await first.close()
  const second = await openDatabase({ dataDir: dir })
  t.equal((await second.prisma.workspace.findUnique({ where: { name: 'persisted' } }))?.name, 'persisted')
  await second.close()
})

t.test('a PostgreSQL that stops answering while the migrations run fails the start with a message, not a hang', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL (the embedded database has no connection to lose)' }, async (t) => {
  const { url, drop } = await createScratchDatabase(process.env.DATABASE_URL!, 'frozen')
  const { proxy, url: proxied } = await TcpProxy.inFrontOf(url)
  t.teardown(async () => {
    await proxy.close()
    await drop()
  })
  // The migrations' connection takes the lock; from then on the server's answers stop on every connection.
  proxy.holdRepliesTo('pg_advisory_lock')
  const began = Date.now()
  const opening = openDatabase({ databaseUrl: proxied, dataDir: 'unused' })
  await waitFor(() => proxy.held > 0, 5000)
  proxy.holdReplies()
  await t.rejects(opening, /^PostgreSQL stopped answering while the migrations ran/)
  const took = Date.now() - began
  t.ok(took < 2 * MIGRATION_PING_EVERY_MS + 6000, `after two pings without an answer (${took} ms)`)
})

t.test('a PostgreSQL that answers the watchdog with errors (too many connections) is answering: the migrations wait on', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const server = new URL(process.env.DATABASE_URL!)
  const admin = new pg.Client({ connectionString: server.toString() })
  await admin.connect()
  const suffix = `${process.pid}_${Date.now()}`
  const [database, role] = [`watchdog_${suffix}`, `watchdog_${suffix}`]
  await admin.query(`CREATE ROLE "${role}" LOGIN`)
  // Two connections (the lock holder's below and the migrations' own): every ping is refused with an error.
  await admin.query(`CREATE DATABASE "${database}" OWNER "${role}" CONNECTION LIMIT 2`)
  t.teardown(async () => {
    await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
    await admin.query(`DROP ROLE IF EXISTS "${role}"`)
    await admin.end()
  })
  // Another instance migrating holds the migration lock for longer than two pings.
  const url = (user: string) => Object.assign(new URL(server.toString()), { username: user, pathname: `/${database}` }).toString()
  const holder = new pg.Client({ connectionString: url(server.username || 'postgres') })
  holder.on('error', () => {})
  await holder.connect()
  await holder.query('SELECT pg_advisory_lock(72707369)')
  const held = 2 * MIGRATION_PING_EVERY_MS + 1000
  setTimeout(() => void holder.query('SELECT pg_advisory_unlock(72707369)').then(() => holder.end()), held)
  const began = Date.now()
  const opened = await openDatabase({ databaseUrl: url(role), dataDir: 'unused' })
  t.ok(Date.now() - began >= held - 100, `opened once the lock was given back (${Date.now() - began} ms)`)
  await opened.close()
})
