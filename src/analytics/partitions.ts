/**
 * The monthly partitions of analytics."Visit": created ahead of time (this month and the next ones) so that a
 * batch never waits for DDL, and dropped whole once older than the retention, which costs nothing like a
 * DELETE of millions of rows. The aggregates (per link, workspace and group; hourly and daily) and the seen-today rows
 * are trimmed at the same time.
 * Every instance runs this; the DDL is idempotent and a race between two instances is harmless.
 */
import type { PrismaClient } from '../db/database.js'

/** Months created ahead of the current one. */
export const MONTHS_AHEAD = 2

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

/** duplicate_table, unique_violation on the catalog: another instance created the same partition meanwhile. */
const createdByAnother = (error: unknown) => /42P07|23505|already exists/.test(String((error as { message?: string })?.message ?? error))

async function createPartition(prisma: PrismaClient, month: Month): Promise<void> {
  const names = known.get(prisma) ?? new Set<string>()
  known.set(prisma, names)
  if (names.has(month.name)) return
  try {
    await prisma.$executeRawUnsafe(
      `CREATE TABLE IF NOT EXISTS "analytics"."${month.name}" PARTITION OF "analytics"."Visit"
       FOR VALUES FROM ('${month.from}') TO ('${month.to}')`,
    )
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

/** This month's partition and the next MONTHS_AHEAD. */
export async function createPartitionsAhead(prisma: PrismaClient, now: Date): Promise<void> {
  for (let offset = 0; offset <= MONTHS_AHEAD; offset++) await createPartition(prisma, monthOf(now, offset))
}

/**
 * Drops the partitions whose every visit is older than `retentionDays`, deletes aggregates older than that (from a whole UTC day),
 * seen-today rows older than yesterday and the ids of batches stored over a day ago. Returns the partitions dropped.
 */
export async function dropExpired(prisma: PrismaClient, now: Date, retentionDays: number): Promise<string[]> {
  const cutoff = new Date(now.getTime() - retentionDays * 86_400_000)
  const partitions = await prisma.$queryRawUnsafe<{ name: string; upper: Date }[]>(
    `SELECT c.relname AS "name", (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz AS "upper"
     FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = '"analytics"."Visit"'::regclass`,
  )
  const expired = partitions.filter((partition) => new Date(partition.upper).getTime() <= cutoff.getTime()).map((partition) => partition.name)
  for (const name of expired) {
    await prisma.$executeRawUnsafe(`DROP TABLE IF EXISTS "analytics"."${name}"`)
    known.get(prisma)?.delete(name)
  }
  // Both tiers are cut at the same midnight UTC: a daily row stands for all its day's hours, so a day is kept or
  // dropped whole in each (hourly rows of the cutoff's own day stay, at most a day past the retention).
  const day = new Date(Math.floor(cutoff.getTime() / 86_400_000) * 86_400_000).toISOString()
  // The group tables too: a group holds its links' rows summed, so it loses what they lose, on the same day.
  const tables = [['LinkHourly', 'hour'], ['WorkspaceHourly', 'hour'], ['GroupHourly', 'hour'], ['LinkDaily', 'day'], ['WorkspaceDaily', 'day'], ['GroupDaily', 'day']]
  for (const [table, time] of tables) {
    await prisma.$executeRawUnsafe(`DELETE FROM "analytics"."${table}" WHERE "${time}" < $1::timestamptz`, day)
  }
  const dayAgo = new Date(now.getTime() - 86_400_000).toISOString()
  await prisma.$executeRawUnsafe(`DELETE FROM "analytics"."SeenToday" WHERE "day" < $1::date`, dayAgo.slice(0, 10))
  await prisma.$executeRawUnsafe(`DELETE FROM "analytics"."VisitBatch" WHERE "storedAt" < $1::timestamptz`, dayAgo)
  return expired
}
