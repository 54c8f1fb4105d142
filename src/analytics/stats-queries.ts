/**
 * The SQL of the stats: every figure is summed from the aggregates, the whole UTC days of the range from the daily
 * ones (LinkDaily, WorkspaceDaily, GroupDaily) and its partial days from the hourly ones (LinkHourly, WorkspaceHourly,
 * GroupHourly), so that
 * a range of months reads a few thousand rows per breakdown instead of millions, and from the raw visits not yet
 * rolled up into them (the last minute or so, src/analytics/visit-rollup.ts), spread over the same breakdowns,
 * in the same statement so that the two meet exactly at "rolledUpTo". Buckets are cut by PostgreSQL (date_trunc
 * in the caller's zone), which knows every DST change.
 */
import type { Interval } from '../../schemas/stats.js'
import type { PrismaClient } from '../db/database.js'
import { fieldError } from '../errors/app-error.js'
import type { StatsRange } from './stats-range.js'
import { aggregateValueSql } from './visit-aggregates.js'

/**
 * A source's two tiers of aggregates: hours, and whole UTC days (the same visits, summed); `firstOfDay`, the raw
 * visits' column that counts the same visitors as their "visitors".
 */
export const LINK_TABLES = { hourly: '"analytics"."LinkHourly"', daily: '"analytics"."LinkDaily"', firstOfDay: 'firstOfDay' } as const
export const WORKSPACE_TABLES = { hourly: '"analytics"."WorkspaceHourly"', daily: '"analytics"."WorkspaceDaily"', firstOfDay: 'firstOfWorkspaceDay' } as const
/** A tag's or a folder's, keyed like the workspace's (group-history.ts); its visitors are its links' own, summed. */
export const GROUP_TABLES = { hourly: '"analytics"."GroupHourly"', daily: '"analytics"."GroupDaily"', firstOfDay: 'firstOfDay' } as const

/**
 * Where the rows come from. `where` filters the tables aliased h and uses $1…$n for `params`; the queries below
 * number their own parameters after those.
 */
export interface StatsSource {
  tables: typeof LINK_TABLES | typeof WORKSPACE_TABLES | typeof GROUP_TABLES
  where: string
  params: unknown[]
  /** The condition on the raw visits (alias h) when the tables' columns are not theirs (a group's); else `where`. */
  visits?: string
  /**
   * How the top links are read: the `link` dimension of the workspace's aggregates, or the links' own totals;
   * `among` selects the uniqs of the links that may be listed, with parameters of its own (PostgreSQL refuses a
   * parameter that a statement does not use).
   */
  links?: { workspaceId: number; byDimension: boolean; among: { sql: string; params: unknown[] } }
  /** "rolledUpTo" as read before the statements (withPendingFrom), for the planner. */
  rolledUpTo?: string
}

/**
 * The source with "rolledUpTo" as read now. The statements still take the raw visits from "rolledUpTo" as they
 * see it (a rollup may have moved it on meanwhile), and it only moves forward, so the value read here changes no
 * answer: it is there for the planner, which can see from it that the raw visits wanted are the last minute's,
 * and read them by their index on "at" instead of scanning the month's partition.
 */
export async function withPendingFrom(prisma: PrismaClient, source: StatsSource): Promise<StatsSource> {
  const [{ rolledUpTo }] = await prisma.$queryRawUnsafe<{ rolledUpTo: string }[]>(`SELECT "rolledUpTo"::text AS "rolledUpTo" FROM "analytics"."Rollup"`)
  return { ...source, rolledUpTo }
}

/** The raw visits (alias `v`) not rolled up yet, as the statement sees them, bounded for the planner as well. */
function pendingSql(params: Params, rolledUpTo: string | undefined, v: string): string {
  const hint = rolledUpTo === undefined ? '' : `${v}."at" >= ${params.add(rolledUpTo)}::timestamptz AND `
  return `${hint}${v}."at" >= (SELECT "rolledUpTo" FROM "analytics"."Rollup")`
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

/** A statement's parameters: the source's, then its own, each added where the SQL names it. */
class Params {
  readonly values: unknown[]
  constructor(source: { params: unknown[] }) {
    this.values = [...source.params]
  }
  add(value: unknown): string {
    return `$${this.values.push(value)}`
  }
}

const DAY = 86_400_000

/**
 * The range's parameters: its ends, and the whole UTC days inside it (an empty span at `to` when there are none);
 * which of the spans before, between and after are empty is known here, so that no piece reads an empty one (a
 * scan of nothing still probes the index once per link of a tag).
 */
function rangeParams(params: Params, range: StatsRange, rolledUpTo?: string) {
  const [from, to] = [range.from.getTime(), range.to.getTime()]
  let [dayStart, dayEnd] = [Math.ceil(from / DAY) * DAY, Math.floor(to / DAY) * DAY]
  if (dayStart >= dayEnd) dayStart = dayEnd = to
  // Each is added to the parameters when the SQL first names it: PostgreSQL refuses a parameter left unused.
  const instant = (at: number) => {
    let placeholder: string | undefined
    return () => (placeholder ??= params.add(new Date(at).toISOString()))
  }
  const [fromAt, toAt, dayStartAt, dayEndAt] = [from, to, dayStart, dayEnd].map(instant)
  return {
    get from() { return fromAt() },
    get to() { return toAt() },
    get dayStart() { return dayStartAt() },
    get dayEnd() { return dayEndAt() },
    has: { before: from < dayStart, days: dayStart < dayEnd, after: dayEnd < to },
    pending: (v: string) => pendingSql(params, rolledUpTo, v),
  }
}
type RangeParams = ReturnType<typeof rangeParams>

/**
 * Every bucket's start. Hours: the local hour each UTC hour of the range starts in (the range is whole UTC hours,
 * the aggregates' unit), as the counts cut them; stepping 60 minutes from the first missed every hour after a
 * half-hour DST change (Australia/Lord_Howe) and added an empty one at the end in a half-hour zone. Days, weeks and
 * months step in local time (a day is 23 or 25 hours at a DST change) and are turned back into instants in the zone.
 * The first is truncated in local time too: truncated in the zone, a day whose midnight does not exist (DST starting at
 * 00:00, as in Santiago) began at 01:00, and every day after it was stepped from 01:00 while the counts were at 00:00.
 */
function bucketsSql(interval: Interval, r: RangeParams, zone: string): string {
  if (interval === 'hour') {
    return `SELECT DISTINCT date_trunc('hour', u, ${zone}::text) AS "start"
      FROM generate_series(${r.from}::timestamptz, ${r.to}::timestamptz - interval '1 microsecond', interval '1 hour') AS u`
  }
  return `SELECT local AT TIME ZONE ${zone}::text AS "start"
    FROM generate_series(date_trunc('${interval}', ${r.from}::timestamptz AT TIME ZONE ${zone}::text),
                         (${r.to}::timestamptz - interval '1 microsecond') AT TIME ZONE ${zone}::text, interval '1 ${interval}') AS local`
}

/**
 * Whether every whole UTC day of the range falls in one bucket of the series, so that daily rows can stand for
 * their hours: always in UTC by day, week or month; never by hour; in other zones, when the zone's buckets
 * happen to start at midnight UTC (rarely for days, mostly not for weeks and months). PostgreSQL decides, with
 * the same tz database that cuts the buckets; it is one small InitPlan.
 */
function daysFitBucketsSql(interval: Interval, r: RangeParams, zone: string): string {
  if (interval === 'hour') return 'false'
  return `(SELECT coalesce(bool_and(date_trunc('${interval}', d, ${zone}::text) =
      date_trunc('${interval}', d + interval '24 hours' - interval '1 microsecond', ${zone}::text)), true)
    FROM generate_series(${r.dayStart}::timestamptz, ${r.dayEnd}::timestamptz - interval '24 hours', interval '24 hours') AS d)`
}

/** The breakdowns of one raw visit (h), as the aggregates name them and cut their values. */
const BREAKDOWNS = `('total', ''), ('country', coalesce(h."country", '')), ('referrer', coalesce(${aggregateValueSql('h."referrerHost"')}, '')),
  ('device', h."device"), ('os', coalesce(${aggregateValueSql('h."os"')}, '')),
  ('browser', coalesce(${aggregateValueSql('h."browser"')}, '')), ('destination', ${aggregateValueSql('h."destination"')})`

/**
 * The source's rows over the range, in pieces that each read one span by its index: the whole UTC days from the
 * daily tier (when `useDays()`, an SQL boolean asked for only if there are whole days; else from the hourly
 * one), the partial days at the edges from the hourly tier, and the raw visits from "rolledUpTo" on as rows of one visit each. The aggregates hold every
 * visit before "rolledUpTo" and none after, in both tiers alike, so the pieces add up exactly.
 * Columns: the tables' keys, "dimension", "hour" (of a daily row: its day), "value", "clicks", "visitors",
 * "bots"; aliased h.
 */
function rangeRows(source: StatsSource, r: RangeParams, useDays: () => string): string {
  const link = source.tables === LINK_TABLES
  const keys = link ? '"linkUniq"' : '"workspaceId", "domain"'
  const counts = `"value", "clicks", "visitors", "bots"`
  const hours = (from: string, to: string, when = 'true') =>
    `SELECT ${keys}, "dimension", "hour", ${counts} FROM ${source.tables.hourly} h
      WHERE ${source.where} AND h."hour" >= ${from}::timestamptz AND h."hour" < ${to}::timestamptz AND ${when}`
  // A raw visit's visitor counts by the source's first-of-day flag, but in the top links by the link's own.
  const visitors = link ? `h."${source.tables.firstOfDay}"` : `CASE WHEN d."dimension" = 'link' THEN h."firstOfDay" ELSE h."${source.tables.firstOfDay}" END`
  const one = `(NOT h."bot")::int AS "clicks", (${visitors} AND NOT h."bot")::int AS "visitors", h."bot"::int AS "bots"`
  const breakdowns = link ? BREAKDOWNS : `${BREAKDOWNS}, ('link', h."linkUniq"::text)`
  const pieces = [
    r.has.before && hours(r.from, r.dayStart),
    r.has.after && hours(r.dayEnd, r.to),
    r.has.days && hours(r.dayStart, r.dayEnd, `NOT ${useDays()}`),
    r.has.days &&
      `SELECT ${keys}, "dimension", "day", ${counts} FROM ${source.tables.daily} h
      WHERE ${source.where} AND h."day" >= ${r.dayStart}::timestamptz AND h."day" < ${r.dayEnd}::timestamptz AND ${useDays()}`,
  ].filter(Boolean)
  return `(${pieces.join('\n    UNION ALL\n    ')}
    UNION ALL
    SELECT ${link ? 'h."linkUniq"' : 'h."workspaceId", h."domain"'}, d."dimension", date_trunc('hour', h."at", 'UTC'), d."value",
      ${one}
    FROM "analytics"."Visit" h CROSS JOIN LATERAL (VALUES ${breakdowns}) AS d("dimension", "value")
    WHERE ${r.pending('h')} AND h."at" >= ${r.from}::timestamptz
      AND h."at" < ${r.to}::timestamptz AND ${source.visits ?? source.where}) h`
}

/** The series, every bucket in order with zeros where nothing was counted. */
export async function readSeries(prisma: PrismaClient, source: StatsSource, range: StatsRange): Promise<({ start: Date } & Counts)[]> {
  const params = new Params(source)
  const r = rangeParams(params, range, source.rolledUpTo)
  const zone = params.add(range.timezone)
  const rows = await query<{ start: Date } & CountRow>(
    prisma,
    `WITH "counted" AS (
       SELECT date_trunc('${range.interval}', h."hour", ${zone}::text) AS "start",
              sum(h."clicks") AS "clicks", sum(h."visitors") AS "visitors", sum(h."bots") AS "bots"
       FROM ${rangeRows(source, r, () => daysFitBucketsSql(range.interval, r, zone))}
       WHERE h."dimension" = 'total'
       GROUP BY 1)
     SELECT b."start", coalesce(c."clicks", 0)::int8 AS "clicks", coalesce(c."visitors", 0)::int8 AS "visitors",
            coalesce(c."bots", 0)::int8 AS "bots"
     FROM (${bucketsSql(range.interval, r, zone)}) b LEFT JOIN "counted" c ON c."start" = b."start"
     ORDER BY b."start"`,
    params.values,
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
  const params = new Params(source)
  const r = rangeParams(params, range, source.rolledUpTo)
  const rows = await query<{ dimension: TopDimension; value: string; clicks: bigint; visitors: bigint }>(
    prisma,
    `SELECT "dimension", "value", "clicks", "visitors" FROM (
       SELECT h."dimension", h."value", sum(h."clicks")::int8 AS "clicks", sum(h."visitors")::int8 AS "visitors",
              row_number() OVER (PARTITION BY h."dimension" ORDER BY sum(h."clicks") DESC, h."value") AS "rank"
       FROM ${rangeRows(source, r, () => 'true')}
       WHERE h."dimension" = ANY(${params.add([...TOP_DIMENSIONS])}::text[])
       GROUP BY h."dimension", h."value"
       HAVING sum(h."clicks") > 0) ranked
     WHERE "rank" <= ${params.add(limit)}::int
     ORDER BY "dimension", "rank"`,
    params.values,
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

/** Candidates read exactly per entry of the top links (see readTopLinks). */
const CANDIDATES_PER_ENTRY = 5

/**
 * The links with the most clicks, joined to the links that still exist in the workspace (a deleted link's
 * aggregates stay until they expire, but it has no domain and slug to show any more).
 *
 * A workspace of many rarely visited links has a long tail: summing every link's rows over months reads about
 * one row per link and day visited (1.6 million for 5 million visits over 100,000 links and 90 days). So the
 * links with the most clicks of all time (LinkClicks, plus their raw visits past "rolledUpTo") are read first, as
 * candidates, and only their rows are summed. A link's clicks in any range and on any domain are at most its
 * clicks of all time, so when the last entry found has more clicks than the best link left out could have at
 * all, the answer is exact; otherwise (clicks spread evenly, or a range far from where most clicks were) every
 * link is summed, as before.
 */
export async function readTopLinks(prisma: PrismaClient, source: StatsSource, range: StatsRange, limit: number): Promise<TopLinkRow[]> {
  if (!source.links) return []
  const width = limit * CANDIDATES_PER_ENTRY
  const bounds = await readClickBounds(prisma, source.links.among, width + 1, source.rolledUpTo)
  if (bounds.length <= width) return sumTopLinks(prisma, source, range, limit, bounds.map((bound) => bound.uniq))
  const top = await sumTopLinks(prisma, source, range, limit, bounds.slice(0, width).map((bound) => bound.uniq))
  const needed = top.length === limit ? top[limit - 1].clicks : 1
  if (bounds[width].most < needed) return top
  return sumTopLinks(prisma, source, range, limit)
}

/** The `count` links of `among` with the most clicks of all time, most first: an upper bound of any range's. */
async function readClickBounds(prisma: PrismaClient, among: { sql: string; params: unknown[] }, count: number, rolledUpTo?: string) {
  const params = new Params(among)
  const rows = await query<{ uniq: number; most: bigint | number }>(
    prisma,
    `WITH "pending" AS (
       SELECT v."linkUniq", count(*) FILTER (WHERE NOT v."bot") AS "clicks" FROM "analytics"."Visit" v
       WHERE ${pendingSql(params, rolledUpTo, 'v')} GROUP BY 1)
     SELECT u."uniq", coalesce(c."clicks", 0) + coalesce(p."clicks", 0) AS "most"
     FROM (${among.sql}) AS u("uniq")
       LEFT JOIN "analytics"."LinkClicks" c ON c."linkUniq" = u."uniq"
       LEFT JOIN "pending" p ON p."linkUniq" = u."uniq"
     WHERE coalesce(c."clicks", 0) + coalesce(p."clicks", 0) > 0
     ORDER BY 2 DESC, 1
     LIMIT ${params.add(count)}::int`,
    params.values,
  )
  return rows.map((row) => ({ uniq: row.uniq, most: Number(row.most) }))
}

/** The top links summed over the range, among `only` (uniqs) or every link of the source. */
async function sumTopLinks(prisma: PrismaClient, source: StatsSource, range: StatsRange, limit: number, only?: number[]): Promise<TopLinkRow[]> {
  const links = source.links!
  const params = new Params(source)
  const r = rangeParams(params, range, source.rolledUpTo)
  const perLink = links.byDimension
    ? `SELECT h."value"::int AS "uniq", sum(h."clicks") AS "clicks", sum(h."visitors") AS "visitors"
       FROM ${rangeRows(source, r, () => 'true')} WHERE h."dimension" = 'link'
         ${only ? `AND h."value" = ANY(${params.add(only.map(String))}::text[])` : ''}
       GROUP BY h."value"`
    : `SELECT h."linkUniq" AS "uniq", sum(h."clicks") AS "clicks", sum(h."visitors") AS "visitors"
       FROM ${rangeRows(source, r, () => 'true')} WHERE h."dimension" = 'total'
         ${only ? `AND h."linkUniq" = ANY(${params.add(only)}::int[])` : ''}
       GROUP BY h."linkUniq"`
  const rows = await query<{ uniq: number; domain: string; slug: string; clicks: bigint; visitors: bigint }>(
    prisma,
    `SELECT l."uniq", l."domain", l."slug", t."clicks"::int8 AS "clicks", t."visitors"::int8 AS "visitors"
     FROM (${perLink}) t JOIN "Link" l ON l."uniq" = t."uniq" AND l."workspaceId" = ${params.add(links.workspaceId)}::int
     WHERE t."clicks" > 0
     ORDER BY t."clicks" DESC, l."uniq"
     LIMIT ${params.add(limit)}::int`,
    params.values,
  )
  return rows.map((row) => ({ ...row, clicks: Number(row.clicks), visitors: Number(row.visitors) }))
}
