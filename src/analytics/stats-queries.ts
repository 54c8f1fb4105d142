/**
 * The SQL of the stats: every figure is summed from the hourly aggregates (LinkHourly, WorkspaceHourly), so that
 * a range of months reads a few thousand rows per breakdown instead of millions, and from the raw visits not yet
 * rolled up into them (the last minute or so, src/analytics/visit-rollup.ts), spread over the same breakdowns,
 * in the same statement so that the two meet exactly at "rolledUpTo". Buckets are cut by PostgreSQL (date_trunc
 * in the caller's zone), which knows every DST change.
 */
import type { Interval } from '../../schemas/stats.js'
import type { PrismaClient } from '../db/database.js'
import { fieldError } from '../errors/app-error.js'
import type { StatsRange } from './stats-range.js'
import { MAX_AGGREGATE_VALUE } from './visit-aggregates.js'

/**
 * Where the hourly rows come from. `where` filters the table aliased h and uses $1…$n for `params`; the
 * queries below number their own parameters after those.
 */
export interface StatsSource {
  table: '"analytics"."LinkHourly"' | '"analytics"."WorkspaceHourly"'
  where: string
  params: unknown[]
  /** How the top links are read: the `link` dimension of WorkspaceHourly, or the links' own totals. */
  links?: { workspaceId: number; byDimension: boolean }
  /** The placeholder of a "rolledUpTo" read before the statement (set by `withPendingFrom`). */
  pendingFrom?: string
}

/**
 * The source with "rolledUpTo" as read now among its parameters. The statements still take the raw visits from
 * "rolledUpTo" as they see it (a rollup may have moved it on meanwhile), and it only moves forward, so the value
 * read here changes no answer: it is there for the planner, which can see from it that the raw visits wanted
 * are the last minute's, and read them by index instead of scanning the month's partition.
 */
export async function withPendingFrom(prisma: PrismaClient, source: StatsSource): Promise<StatsSource> {
  const [{ rolledUpTo }] = await prisma.$queryRawUnsafe<{ rolledUpTo: string }[]>(`SELECT "rolledUpTo"::text AS "rolledUpTo" FROM "analytics"."Rollup"`)
  return { ...source, params: [...source.params, rolledUpTo], pendingFrom: `$${source.params.length + 1}` }
}

export interface Counts {
  clicks: number
  visitors: number
  bots: number
}

/** The top lists' dimensions, as the aggregates name them. */
export const TOP_DIMENSIONS = ['country', 'referrer', 'device', 'os', 'browser', 'destination'] as const
export type TopDimension = (typeof TOP_DIMENSIONS)[number]

interface CountRow {
  clicks: bigint | number
  visitors: bigint | number
  bots: bigint | number
}

const numbers = (row: CountRow): Counts => ({ clicks: Number(row.clicks), visitors: Number(row.visitors), bots: Number(row.bots) })

/** PostgreSQL's tz database may lack a zone Intl knows (or the other way round): still the client's 400. */
async function query<Row>(prisma: PrismaClient, sql: string, params: unknown[]): Promise<Row[]> {
  try {
    return await prisma.$queryRawUnsafe<Row[]>(sql, ...params)
  } catch (error) {
    if (/time zone .* not recognized|22023/.test(String((error as Error)?.message))) {
      throw fieldError('/timezone', 'must be an IANA time zone name, such as Europe/Paris or UTC')
    }
    throw error
  }
}

/**
 * Every bucket's start. Hours follow one another in absolute time; days, weeks and months step in local time
 * (a day is 23 or 25 hours at a DST change) and are turned back into instants in the zone.
 */
function bucketsSql(interval: Interval, p: (n: number) => string): string {
  const [from, to, zone] = [p(1), p(2), p(3)]
  if (interval === 'hour') {
    return `SELECT generate_series(date_trunc('hour', ${from}::timestamptz, ${zone}::text), ${to}::timestamptz - interval '1 microsecond', interval '1 hour') AS "start"`
  }
  return `SELECT local AT TIME ZONE ${zone}::text AS "start"
    FROM generate_series(date_trunc('${interval}', ${from}::timestamptz, ${zone}::text) AT TIME ZONE ${zone}::text,
                         (${to}::timestamptz - interval '1 microsecond') AT TIME ZONE ${zone}::text, interval '1 ${interval}') AS local`
}

/** The breakdowns of one raw visit (h), as the aggregates name them and cut their values. */
const BREAKDOWNS = `('total', ''), ('country', coalesce(h."country", '')), ('referrer', coalesce(h."referrerHost", '')),
  ('device', h."device"), ('os', coalesce(h."os", '')), ('browser', coalesce(h."browser", '')),
  ('destination', left(h."destination", ${MAX_AGGREGATE_VALUE}))`

/**
 * The source's hourly rows: its aggregates, and its raw visits from "rolledUpTo" on as rows of one visit each.
 * Columns: the table's keys, "dimension", "hour", "value", "clicks", "visitors", "bots"; aliased h.
 */
function hourlyRows(source: StatsSource): string {
  const counts = `"dimension", "hour", "value", "clicks", "visitors", "bots"`
  const hint = source.pendingFrom ? `h."at" >= ${source.pendingFrom}::timestamptz AND ` : ''
  const pending = `${hint}h."at" >= (SELECT "rolledUpTo" FROM "analytics"."Rollup") AND ${source.where}`
  const one = (firstOfDay: string) =>
    `(NOT h."bot")::int AS "clicks", (h."${firstOfDay}" AND NOT h."bot")::int AS "visitors", h."bot"::int AS "bots"`
  if (source.table === '"analytics"."LinkHourly"') {
    return `(SELECT "linkUniq", ${counts} FROM ${source.table} h WHERE ${source.where}
      UNION ALL
      SELECT h."linkUniq", d."dimension", date_trunc('hour', h."at", 'UTC'), d."value", ${one('firstOfDay')}
      FROM "analytics"."Visit" h CROSS JOIN LATERAL (VALUES ${BREAKDOWNS}) AS d("dimension", "value")
      WHERE ${pending}) h`
  }
  return `(SELECT "workspaceId", "domain", ${counts} FROM ${source.table} h WHERE ${source.where}
    UNION ALL
    SELECT h."workspaceId", h."domain", d."dimension", date_trunc('hour', h."at", 'UTC'), d."value", ${one('firstOfWorkspaceDay')}
    FROM "analytics"."Visit" h CROSS JOIN LATERAL (VALUES ${BREAKDOWNS}, ('link', h."linkUniq"::text)) AS d("dimension", "value")
    WHERE ${pending}) h`
}

/** Placeholders numbered after the source's own parameters. */
const placeholders = (source: StatsSource) => (n: number) => `$${source.params.length + n}`
const rangeParams = (range: StatsRange) => [range.from.toISOString(), range.to.toISOString(), range.timezone]

/** The series, every bucket in order with zeros where nothing was counted. */
export async function readSeries(prisma: PrismaClient, source: StatsSource, range: StatsRange): Promise<({ start: Date } & Counts)[]> {
  const p = placeholders(source)
  const rows = await query<{ start: Date } & CountRow>(
    prisma,
    `WITH "counted" AS (
       SELECT date_trunc('${range.interval}', h."hour", ${p(3)}::text) AS "start",
              sum(h."clicks") AS "clicks", sum(h."visitors") AS "visitors", sum(h."bots") AS "bots"
       FROM ${hourlyRows(source)}
       WHERE h."dimension" = 'total' AND h."hour" >= ${p(1)}::timestamptz AND h."hour" < ${p(2)}::timestamptz
       GROUP BY 1)
     SELECT b."start", coalesce(c."clicks", 0)::int8 AS "clicks", coalesce(c."visitors", 0)::int8 AS "visitors",
            coalesce(c."bots", 0)::int8 AS "bots"
     FROM (${bucketsSql(range.interval, p)}) b LEFT JOIN "counted" c ON c."start" = b."start"
     ORDER BY b."start"`,
    [...source.params, ...rangeParams(range)],
  )
  return rows.map((row) => ({ start: new Date(row.start), ...numbers(row) }))
}

export interface TopRow {
  dimension: TopDimension
  value: string
  clicks: number
  visitors: number
}

/**
 * The `limit` values with the most clicks of each breakdown, in one pass over the range's rows. Values seen
 * only from bots are left out: the lists rank what people did.
 */
export async function readTops(prisma: PrismaClient, source: StatsSource, range: StatsRange, limit: number): Promise<TopRow[]> {
  const p = placeholders(source)
  const rows = await query<{ dimension: TopDimension; value: string; clicks: bigint; visitors: bigint }>(
    prisma,
    `SELECT "dimension", "value", "clicks", "visitors" FROM (
       SELECT h."dimension", h."value", sum(h."clicks")::int8 AS "clicks", sum(h."visitors")::int8 AS "visitors",
              row_number() OVER (PARTITION BY h."dimension" ORDER BY sum(h."clicks") DESC, h."value") AS "rank"
       FROM ${hourlyRows(source)}
       WHERE h."dimension" = ANY(${p(3)}::text[])
         AND h."hour" >= ${p(1)}::timestamptz AND h."hour" < ${p(2)}::timestamptz
       GROUP BY h."dimension", h."value"
       HAVING sum(h."clicks") > 0) ranked
     WHERE "rank" <= ${p(4)}::int
     ORDER BY "dimension", "rank"`,
    [...source.params, range.from.toISOString(), range.to.toISOString(), [...TOP_DIMENSIONS], limit],
  )
  return rows.map((row) => ({ dimension: row.dimension, value: row.value, clicks: Number(row.clicks), visitors: Number(row.visitors) }))
}

export interface TopLinkRow {
  uniq: number
  domain: string
  slug: string
  clicks: number
  visitors: number
}

/**
 * The links with the most clicks, joined to the links that still exist in the workspace (a deleted link's
 * aggregates stay until they expire, but it has no domain and slug to show any more).
 */
export async function readTopLinks(prisma: PrismaClient, source: StatsSource, range: StatsRange, limit: number): Promise<TopLinkRow[]> {
  if (!source.links) return []
  const p = placeholders(source)
  const perLink = source.links.byDimension
    ? `SELECT h."value"::int AS "uniq", sum(h."clicks") AS "clicks", sum(h."visitors") AS "visitors"
       FROM ${hourlyRows(source)} WHERE h."dimension" = 'link'
         AND h."hour" >= ${p(1)}::timestamptz AND h."hour" < ${p(2)}::timestamptz
       GROUP BY h."value"`
    : `SELECT h."linkUniq" AS "uniq", sum(h."clicks") AS "clicks", sum(h."visitors") AS "visitors"
       FROM ${hourlyRows(source)} WHERE h."dimension" = 'total'
         AND h."hour" >= ${p(1)}::timestamptz AND h."hour" < ${p(2)}::timestamptz
       GROUP BY h."linkUniq"`
  const rows = await query<{ uniq: number; domain: string; slug: string; clicks: bigint; visitors: bigint }>(
    prisma,
    `SELECT l."uniq", l."domain", l."slug", t."clicks"::int8 AS "clicks", t."visitors"::int8 AS "visitors"
     FROM (${perLink}) t JOIN "Link" l ON l."uniq" = t."uniq" AND l."workspaceId" = ${p(4)}::int
     WHERE t."clicks" > 0
     ORDER BY t."clicks" DESC, l."uniq"
     LIMIT ${p(3)}::int`,
    [...source.params, range.from.toISOString(), range.to.toISOString(), limit, source.links.workspaceId],
  )
  return rows.map((row) => ({ ...row, clicks: Number(row.clicks), visitors: Number(row.visitors) }))
}
