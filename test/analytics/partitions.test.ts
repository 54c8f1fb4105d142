/**
 * Storage that lasts: monthly partitions of the raw visits are created ahead by the service, and partitions and
 * aggregates older than VISIT_RETENTION_DAYS are dropped; the buffer is written on its own every interval.
 */
import pg from 'pg'
import t from 'tap'
import { buildTestApp, openTestDatabase } from '../support/test-app.js'
import { acmeWorkspace, DESKTOP, visit } from '../redirects/visit-support.js'
import { storeVisits } from '../../src/analytics/visit-store.js'
import { dropExpired } from '../../src/analytics/partitions.js'
import { storedVisit } from './stored-visit.js'

const MARCH_15 = Date.UTC(2031, 2, 15, 12)

const first = await buildTestApp(t, { visits: { now: () => MARCH_15, buffer: { flushEveryMs: 100 } }, redirects: { now: () => MARCH_15 } })
const { app, prisma } = first
await app.ready()

const partitions = async () =>
  (
    await prisma.$queryRawUnsafe<{ name: string }[]>(
      `SELECT c.relname AS "name" FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = '"analytics"."Visit"'::regclass ORDER BY 1`,
    )
  ).map((row) => row.name)

t.test('at start, this month and the next two have their partitions', async (t) => {
  const names = await partitions()
  for (const name of ['Visit_2031_03', 'Visit_2031_04', 'Visit_2031_05']) t.ok(names.includes(name), name)
  t.notOk(names.includes('Visit_2031_06'), 'not further ahead')
})

t.test('visits are written within the interval without anyone asking', async (t) => {
  const { link } = await acmeWorkspace(first)
  const made = await link({ id: 'timed', url: 'https://example.com/timed' })
  t.equal((await visit(app, '/timed')).statusCode, 302)
  let stored = 0
  for (let waited = 0; waited < 5000 && stored === 0; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    ;[{ stored }] = await prisma.$queryRawUnsafe<{ stored: number }[]>(
      `SELECT count(*)::int AS "stored" FROM "analytics"."Visit" WHERE "linkUniq" = $1`,
      made.uniq,
    )
  }
  t.equal(stored, 1, 'the visit reached the database on its own')
  t.equal(app.visitRecorder!.stats().buffered, 0)
})

t.test('partitions and aggregates past the retention are dropped at start once rolled up, the rest kept', async (t) => {
  // Visits of an old month, stored as a batch would store them (the partition is created for them).
  const { token, link } = await acmeWorkspace(first, 'retention', 'go.retention.test')
  const made = await link({ id: 'old-visits', url: 'https://example.com/old' })
  const workspaceId = (await prisma.workspace.findUniqueOrThrow({ where: { name: 'retention' } })).id
  await app.visitRecorder!.flush()
  for (const [day, address] of [[20, '192.0.2.9'], [21, '192.0.2.10']] as const) {
    await app.visits.record({
      link: made.uniq, workspaceId, domain: 'go.retention.test', answer: 'redirect', destination: 'https://example.com/',
      reason: 'default', at: Date.UTC(2030, 11, day, 8), country: null, userAgent: DESKTOP, referrer: undefined, address,
    })
  }
  await app.visitRecorder!.flush()
  t.ok((await partitions()).includes('Visit_2030_12'), 'a partition for the old visits')
  const clicks = async () =>
    (await app.inject({ url: `/v1/links/${made.uniq}`, headers: { 'api-authorization': token } })).json().clicks

  // An instance with a retention of 60 days starts on the 15th of March 2031: December 2030 ended more than 60
  // days before, January 2031 did not. December's visits are not summed into the aggregates yet (as those of an
  // instance's last minute before a stop): dropped now, the link's all-time clicks would never count them.
  const early = await buildTestApp(t, { database: first.database, env: { VISIT_RETENTION_DAYS: '60' }, visits: { now: () => MARCH_15 } })
  await early.app.ready()
  t.ok((await partitions()).includes('Visit_2030_12'), 'a partition past the retention is kept while its visits are not rolled up')
  t.equal(await clicks(), 2, 'counted from the raw visits')
  await app.visitRollup.run(new Date(Date.UTC(2031, 0, 1)))

  const second = await buildTestApp(t, { database: first.database, env: { VISIT_RETENTION_DAYS: '60' }, visits: { now: () => MARCH_15 } })
  await prisma.$executeRawUnsafe(
    `CREATE TABLE IF NOT EXISTS "analytics"."Visit_2031_01" PARTITION OF "analytics"."Visit" FOR VALUES FROM ('2031-01-01T00:00:00Z') TO ('2031-02-01T00:00:00Z')`,
  )
  // The ids of stored batches (the guard against storing a batch twice) are kept a day.
  const stale = '00000000-0000-4000-8000-000000000001'
  const recent = '00000000-0000-4000-8000-000000000002'
  await prisma.$executeRawUnsafe(
    `INSERT INTO "analytics"."VisitBatch" ("id", "storedAt") VALUES ($1::uuid, $2::timestamptz), ($3::uuid, $4::timestamptz)`,
    stale, new Date(MARCH_15 - 25 * 3_600_000).toISOString(), recent, new Date(MARCH_15 - 3_600_000).toISOString(),
  )
  await second.app.ready()
  const batches = await prisma.$queryRawUnsafe<{ id: string }[]>(`SELECT "id"::text AS "id" FROM "analytics"."VisitBatch" WHERE "id" IN ($1::uuid, $2::uuid)`, stale, recent)
  t.same(batches.map((batch) => batch.id), [recent], 'a batch id older than a day is deleted, a newer one kept')
  const names = await partitions()
  t.notOk(names.includes('Visit_2030_12'), 'the old partition is dropped once rolled up')
  t.ok(names.includes('Visit_2031_01'), 'one still within the retention stays')
  t.equal(await clicks(), 2, "the link's all-time clicks still count the dropped visits")
  const [{ oldRows }] = await prisma.$queryRawUnsafe<{ oldRows: number }[]>(
    `SELECT count(*)::int AS "oldRows" FROM "analytics"."LinkHourly" WHERE "hour" < '2031-01-01T00:00:00Z'`,
  )
  t.equal(oldRows, 0, 'and so are the old aggregates')
})

t.test("a partition another instance's retention dropped is created again for a visit of its month", async (t) => {
  const { link } = await acmeWorkspace(first, 'partitions', 'go.partitions.test')
  const made = await link({ id: 'dropped-month', url: 'https://example.com/d' })
  const workspaceId = (await prisma.workspace.findUniqueOrThrow({ where: { name: 'partitions' } })).id
  const target = { uniq: made.uniq, domain: 'go.partitions.test', workspaceId }
  // This process stores a visit in July 2031 (creating the partition, which it then remembers)…
  await storeVisits(first.database, [storedVisit(target, '2031-07-10T10:00:00Z', 1)])
  t.ok((await partitions()).includes('Visit_2031_07'))
  // …another instance drops it…
  await prisma.$executeRawUnsafe('DROP TABLE "analytics"."Visit_2031_07"')
  // …and this one's next visit of that month is stored all the same, not refused for ever.
  await storeVisits(first.database, [storedVisit(target, '2031-07-11T10:00:00Z', 2)])
  const [{ count }] = await prisma.$queryRawUnsafe<{ count: number }[]>(
    `SELECT count(*)::int AS "count" FROM "analytics"."Visit" WHERE "linkUniq" = $1`,
    made.uniq,
  )
  t.equal(count, 1, 'the second visit is stored (the first went with its partition)')
})

t.test(
  "a partition's DDL never holds up the readers of the visits",
  { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL (the embedded database has one connection: no reader can hold a lock meanwhile)' },
  async (t) => {
    const { database, url } = await openTestDatabase(t)
    const instance = await buildTestApp(t, { database, visits: { now: () => MARCH_15 } })
    const { app } = instance
    await app.ready()
    const { token, link } = await acmeWorkspace(instance, 'ddl', 'go.ddl.test')
    const made = await link({ id: 'read-during-ddl', url: 'https://example.com/r' })
    const workspaceId = (await database.prisma.workspace.findUniqueOrThrow({ where: { name: 'ddl' } })).id
    const readLink = () => app.inject({ url: `/v1/links/${made.uniq}`, headers: { 'api-authorization': token } })

    // A long reader of the visits (a rollup, a stats read over a long range) holds its lock on "Visit".
    const reader = new pg.Client({ connectionString: url })
    await reader.connect()
    t.teardown(() => reader.end())
    await reader.query('BEGIN')
    await reader.query('SELECT count(*) FROM "analytics"."Visit"')

    // A visit of a month without a partition: the partition is created and attached beside the reader.
    const stored = storeVisits(database, [storedVisit({ uniq: made.uniq, domain: 'go.ddl.test', workspaceId }, '2032-02-10T10:00:00Z', 1)])
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms, 'still waiting for its lock'))
    t.equal(await Promise.race([stored.then(() => 'stored'), sleep(10_000)]), 'stored', 'the visit of a new month is stored')
    const read = await readLink()
    t.equal(read.statusCode, 200)
    t.equal(read.json().clicks, 1, 'and counted in a read of its link (which reads the visits)')

    // A drop needs "Visit" to itself: it gives up rather than queue every reader behind it, and is tried again;
    // the rest of the retention's work is done all the same.
    await app.visitRollup.run(new Date(Date.UTC(2032, 2, 1)))
    const later = new Date(Date.UTC(2032, 5, 1))
    const oldHours = () =>
      database.prisma.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS "n" FROM "analytics"."LinkHourly" WHERE "hour" < '2032-04-01'`)
    t.ok((await oldHours())[0].n > 0, 'the visit is summed into the aggregates')
    const held = await dropExpired(database.prisma, later, 30)
    t.ok(held.deferred.includes('Visit_2032_02'), 'the drop gives up while the reader holds its lock')
    t.same(held.dropped, [])
    t.equal((await oldHours())[0].n, 0, 'the aggregates past the retention are deleted all the same')
    t.equal((await readLink()).statusCode, 200, 'reads go on')
    await reader.query('COMMIT')
    t.ok((await dropExpired(database.prisma, later, 30)).dropped.includes('Visit_2032_02'), 'dropped once the reader is done')
    t.equal((await readLink()).json().clicks, 1, 'its visit still counted (rolled up)')
  },
)

t.test("an instance whose clock is days off the database's drops nothing and does not roll up, and says so", async (t) => {
  const { database } = await openTestDatabase(t)
  const right = await buildTestApp(t, { database })
  await right.app.ready()
  const { link } = await acmeWorkspace(right, 'clock', 'go.clock.test')
  const made = await link({ id: 'clock', url: 'https://example.com/c' })
  const workspaceId = (await database.prisma.workspace.findUniqueOrThrow({ where: { name: 'clock' } })).id
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString()
  await storeVisits(database, [storedVisit({ uniq: made.uniq, domain: 'go.clock.test', workspaceId }, hourAgo, 1)])
  await right.app.visitRollup.run(new Date(Date.now() - 60_000))
  const state = async () => {
    const [row] = await database.prisma.$queryRawUnsafe<Record<string, unknown>[]>(
      `SELECT (SELECT count(*)::int FROM "analytics"."LinkHourly") AS "hourly", (SELECT count(*)::int FROM "analytics"."LinkDaily") AS "daily",
              (SELECT count(*)::int FROM "analytics"."SeenToday") AS "seenToday", (SELECT count(*)::int FROM "analytics"."Visit") AS "visits",
              (SELECT "rolledUpTo"::text FROM "analytics"."Rollup") AS "rolledUpTo"`,
    )
    return row
  }
  const before = await state()
  t.ok((before.hourly as number) > 0 && (before.seenToday as number) > 0, 'the visit is summed, its visitor seen today')

  // Another instance on a machine whose clock is 40 days ahead, with a retention of 30 days: by its clock,
  // everything stored is past the retention, and the rollup may sum up to 40 days from now.
  const ahead = () => Date.now() + 40 * 86_400_000
  const warnings: string[] = []
  const skewed = await buildTestApp(t, {
    database,
    env: { VISIT_RETENTION_DAYS: '30' },
    visits: { now: ahead, machineClock: ahead, rollup: { everyMs: 50 } },
    logger: { level: 'warn', stream: { write: (line: string) => void warnings.push(JSON.parse(line).msg) } },
  })
  await skewed.app.ready()
  await new Promise((resolve) => setTimeout(resolve, 400))
  t.same(await state(), before, 'no aggregate, seen-today row or visit deleted, and the rollup mark did not move')
  const clockWarnings = warnings.filter((msg) => /clock/.test(msg))
  t.equal(clockWarnings.length, 1, 'said once, not at every check')
  t.match(clockWarnings[0], /clock is over 5 minutes off the database's; this instance neither drops expired visits nor rolls up/)
})

t.test("a visitor seen on a day is remembered while the day's key lives: their visit stored days late, after the maintenance, is not counted again", async (t) => {
  const { database } = await openTestDatabase(t)
  const DAY = 86_400_000
  const now = new Date()
  const twoDaysAgo = Math.floor(now.getTime() / DAY) * DAY - 2 * DAY
  const at = (hours: number) => new Date(twoDaysAgo + hours * 3_600_000).toISOString()
  const link = { uniq: 7, domain: 'go.late.test', workspaceId: 3 }
  await storeVisits(database, [storedVisit(link, at(10), 42)])
  await dropExpired(database.prisma, now, 400)
  // Another instance: the same database through a handle of its own, which holds nothing of who the first one saw.
  await storeVisits({ ...database }, [storedVisit(link, at(12), 42)])
  const firsts = () =>
    database.prisma.$queryRawUnsafe<{ firstOfDay: boolean; firstOfWorkspaceDay: boolean }[]>(
      `SELECT "firstOfDay", "firstOfWorkspaceDay" FROM "analytics"."Visit" WHERE "linkUniq" = $1 ORDER BY "at"`,
      link.uniq,
    )
  t.same(await firsts(), [
    { firstOfDay: true, firstOfWorkspaceDay: true },
    { firstOfDay: false, firstOfWorkspaceDay: false },
  ], 'one visitor that day, for the link and for the workspace')

  const seenThatDay = async () =>
    (await database.prisma.$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS "n" FROM "analytics"."SeenToday" WHERE "day" = $1::date`,
      at(0).slice(0, 10),
    ))[0].n
  await dropExpired(database.prisma, new Date(twoDaysAgo + 4 * DAY - 1), 400)
  t.equal(await seenThatDay(), 2, 'still known until three days after the day ends')
  await dropExpired(database.prisma, new Date(twoDaysAgo + 4 * DAY), 400)
  t.equal(await seenThatDay(), 0, 'forgotten after that')
})
