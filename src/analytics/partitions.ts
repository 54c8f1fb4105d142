/**
 * The monthly partitions of analytics."Visit": created ahead of time (this month and the next ones) so that a
 * batch never waits for DDL, and dropped whole once older than the retention, which costs nothing like a
 * DELETE of millions of rows. The aggregates (per link, workspace and group; hourly and daily) and the seen-today rows
 * are trimmed at the same time.
 * Every instance runs this; the DDL is idempotent and a race between two instances is harmless.
 *
 * The DDL must never hold up the visitors' and the API's reads of "Visit" (a link's `clicks`, stats, the visit
 * batches). A statement that needs an ACCESS EXCLUSIVE lock on it (CREATE TABLE … PARTITION OF, DROP TABLE of a
 * partition) waits behind a long reader (a rollup, a stats read), and every later reader queues behind it. So a
 * partition is created apart and then attached, which locks "Visit" only in SHARE UPDATE EXCLUSIVE mode (reads
 * and inserts go on); and a drop gives up after DDL_LOCK_TIMEOUT_MS, to be tried again at the next maintenance.
 */
import type { PrismaClient } from '../db/database.js'

/** Months created ahead of the current one. */
export const MONTHS_AHEAD = 2

/**
 * How many days who was seen each day is kept (SeenToday: what tells a visit its visitor's first of the day): as
 * long as the day's visitor key can still be had (src/analytics/visitor-key.ts: it lives two days from its first
 * use). A batch stored within that after its visits (kept through a database outage) counts each visitor once, like
 * any other; one stored later hashes its visitors under another key, so nothing could tell them apart anyway.
 */
export const SEEN_KEPT_DAYS = 3

/** How long a partition's DDL waits for its lock before it gives up (the readers queued behind it wait as long). */
export const DDL_LOCK_TIMEOUT_MS = 500

interface Month {
  name: string
  from: string
  to: string
}

function monthOf(at: Date, offset = 0): Month {
  const start = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + offset, 1))
  const end = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1))
  const name = `Visit_${start.toISOString().slice(0, 7).replace('-', '_')}`
  return { name, from: start.toISOString(), to: end.toISOString() }
}

/** The partitions this process knows exist (a cache: creating one is a no-op, but a round trip). */
const known = new WeakMap<PrismaClient, Set<string>>()

/**
 * duplicate_table, unique_violation on the catalog, or the table attached already: another instance created the
 * same partition meanwhile.
 */
const createdByAnother = (error: unknown) =>
  /42P07|23505|already exists|is already a partition/.test(String((error as { message?: string })?.message ?? error))

/** The partitions of "Visit" and their upper bounds. */
function attachedPartitions(prisma: PrismaClient): Promise<{ name: string; upper: Date | null }[]> {
  return prisma.$queryRawUnsafe<{ name: string; upper: Date | null }[]>(
    `SELECT c.relname AS "name", (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz AS "upper"
     FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = '"analytics"."Visit"'::regclass`,
  )
}

/** Runs DDL statements in one transaction that waits at most DDL_LOCK_TIMEOUT_MS for each lock. */
async function ddl(prisma: PrismaClient, statements: string[]): Promise<void> {
  await prisma.$transaction([
    prisma.$executeRawUnsafe(`SET LOCAL lock_timeout = ${DDL_LOCK_TIMEOUT_MS}`),
    ...statements.map((statement) => prisma.$executeRawUnsafe(statement)),
  ])
}

async function createPartition(prisma: PrismaClient, month: Month): Promise<void> {
  let names = known.get(prisma)
  if (!names) known.set(prisma, (names = new Set((await attachedPartitions(prisma)).map((partition) => partition.name))))
  if (names.has(month.name)) return
  try {
    await ddl(prisma, [
      `CREATE TABLE IF NOT EXISTS "analytics"."${month.name}" (LIKE "analytics"."Visit" INCLUDING DEFAULTS)`,
      `ALTER TABLE "analytics"."Visit" ATTACH PARTITION "analytics"."${month.name}" FOR VALUES FROM ('${month.from}') TO ('${month.to}')`,
    ])
  } catch (error) {
    if (!createdByAnother(error)) throw error
  }
  names.add(month.name)
}

/**
 * Forgets which partitions this process believes exist: another instance's retention may have dropped one (a
 * visit of that month is then refused: isMissingPartition), and the next batch creates it again.
 */
export function forgetPartitions(prisma: PrismaClient): void {
  known.delete(prisma)
}

/** PostgreSQL refused a row for want of a partition (SQLSTATE 23514, "no partition of relation … found for row"). */
export const isMissingPartition = (error: unknown) => /no partition of relation/.test(String((error as { message?: string })?.message ?? error))

/** Makes sure the partitions that hold these visits' times (milliseconds) exist. */
export async function ensurePartitionsFor(prisma: PrismaClient, visits: { at: number }[]): Promise<void> {
  // Months change rarely within a batch: a Date only where the time leaves the month seen last.
  const months = new Map<number, Date>()
  let monthStart = Infinity
  let monthEnd = -Infinity
  for (const { at } of visits) {
    if (at >= monthStart && at < monthEnd) continue
    const date = new Date(at)
    months.set(date.getUTCFullYear() * 12 + date.getUTCMonth(), date)
    monthStart = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
    monthEnd = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
  }
  for (const at of months.values()) await createPartition(prisma, monthOf(at))
}

/** This month's partition and the next MONTHS_AHEAD; a month that fails does not stop the next ones. */
export async function createPartitionsAhead(prisma: PrismaClient, now: Date): Promise<void> {
  const failures: unknown[] = []
  for (let offset = 0; offset <= MONTHS_AHEAD; offset++) await createPartition(prisma, monthOf(now, offset)).catch((error) => failures.push(error))
  if (failures.length > 0) throw failures[0]
}

/** lock_not_available: a DDL statement gave up waiting for its lock (DDL_LOCK_TIMEOUT_MS). */
const isLockTimeout = (error: unknown) => /55P03|lock timeout/.test(String((error as { message?: string })?.message ?? error))

/**
 * The first instant whose visits are kept: the midnight UTC before `now` less `retentionDays`. The aggregates are
 * cut there, a day whole (a daily row stands for all its day's hours), and the raw visits are listed from there,
 * though they are dropped only a whole month at a time.
 */
export function retentionStart(now: Date, retentionDays: number): Date {
  const cutoff = now.getTime() - retentionDays * 86_400_000
  return new Date(Math.floor(cutoff / 86_400_000) * 86_400_000)
}

/**
 * Drops the partitions whose every visit is older than `retentionDays` and already summed into the aggregates
 * (a link's all-time `clicks` counts the rolled-up ones: a visit dropped before its rollup, such as those of an
 * instance's last minute before a stop, would never be counted), deletes aggregates older than that (from a whole UTC day),
 * seen-today rows older than SEEN_KEPT_DAYS and the ids of batches stored over a day ago. Returns the partitions
 * dropped, and those whose drop gave up waiting for its lock (a long reader): left for the next maintenance.
 */
export async function dropExpired(prisma: PrismaClient, now: Date, retentionDays: number): Promise<{ dropped: string[]; deferred: string[] }> {
  const cutoff = now.getTime() - retentionDays * 86_400_000
  const [rollup] = await prisma.$queryRawUnsafe<{ rolledUpTo: Date }[]>(`SELECT "rolledUpTo" FROM "analytics"."Rollup"`)
  const summedUpTo = rollup ? new Date(rollup.rolledUpTo).getTime() : -Infinity
  const expired = (await attachedPartitions(prisma))
    // A partition without an upper bound (a DEFAULT one an operator added) is never dropped.
    .filter((partition) => partition.upper !== null && new Date(partition.upper).getTime() <= Math.min(cutoff, summedUpTo))
    .map((partition) => partition.name)
  const dropped: string[] = []
  const deferred: string[] = []
  for (const name of expired) {
    try {
      await ddl(prisma, [`DROP TABLE IF EXISTS "analytics"."${name}"`])
    } catch (error) {
      if (!isLockTimeout(error)) throw error
      deferred.push(name)
      continue
    }
    dropped.push(name)
    known.get(prisma)?.delete(name)
  }
  // Both tiers are cut at the same midnight UTC (hourly rows of the cutoff's own day stay, at most a day past the retention).
  const day = retentionStart(now, retentionDays).toISOString()
  // The group tables too: a group holds its links' rows summed, so it loses what they lose, on the same day.
  const tables = [['LinkHourly', 'hour'], ['WorkspaceHourly', 'hour'], ['GroupHourly', 'hour'], ['LinkDaily', 'day'], ['WorkspaceDaily', 'day'], ['GroupDaily', 'day']]
  for (const [table, time] of tables) {
    await prisma.$executeRawUnsafe(`DELETE FROM "analytics"."${table}" WHERE "${time}" < $1::timestamptz`, day)
  }
  const dayAgo = new Date(now.getTime() - 86_400_000).toISOString()
  const seenSince = new Date(now.getTime() - SEEN_KEPT_DAYS * 86_400_000).toISOString()
  await prisma.$executeRawUnsafe(`DELETE FROM "analytics"."SeenToday" WHERE "day" < $1::date`, seenSince.slice(0, 10))
  await prisma.$executeRawUnsafe(`DELETE FROM "analytics"."VisitBatch" WHERE "storedAt" < $1::timestamptz`, dayAgo)
  return { dropped, deferred }
}
