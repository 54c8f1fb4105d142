/**
 * Writes batches of visits (tables: prisma/migrations/20261123090000_visits): the raw rows, and in the same
 * transaction the hourly aggregates per link and per workspace, the all-time clicks of each link, and who was
 * seen today (to tell first visits of the day, which is what "unique visitors" counts). One transaction per
 * batch, so a batch is counted wholly or not at all; a handful of statements whatever the batch's size.
 *
 * Aggregate rows are written in one sorted order: two instances flushing at once lock the rows they share in
 * the same order, so they wait for each other instead of deadlocking.
 */
import type { Database, SqlQuery } from '../db/database.js'
import { ensurePartitionsFor } from './partitions.js'

/** A visit as stored: resolved (device, browser…), with the visitor's daily key already derived. */
export interface StoredVisit {
  at: Date
  linkUniq: number
  workspaceId: number
  domain: string
  country: string | null
  referrerHost: string | null
  device: string
  os: string | null
  browser: string | null
  destination: string
  reason: 'default' | 'geolocation' | 'rotator'
  answer: 'redirect' | 'masking' | 'interstitial' | 'crawler'
  bot: boolean
  /** The keyed hash of address and user agent under the day's key, as a signed 64-bit decimal string. */
  visitor: string
}

/** The breakdowns kept per hour; `total` has the value ''. */
export const DIMENSIONS = ['total', 'country', 'referrer', 'device', 'os', 'browser', 'destination'] as const
export type Dimension = (typeof DIMENSIONS)[number] | 'link'

/**
 * Aggregate values are part of their table's key, and an index entry must stay well under PostgreSQL's 2,700
 * bytes: longer destinations are cut (two destinations equal over their first 1,024 characters count as one).
 */
export const MAX_AGGREGATE_VALUE = 1024

const dayOf = (at: Date) => at.toISOString().slice(0, 10)
const hourOf = (at: Date) => `${at.toISOString().slice(0, 13)}:00:00Z`

function dimensionValues(visit: StoredVisit): [Dimension, string][] {
  return [
    ['total', ''],
    ['country', visit.country ?? ''],
    ['referrer', visit.referrerHost ?? ''],
    ['device', visit.device],
    ['os', visit.os ?? ''],
    ['browser', visit.browser ?? ''],
    ['destination', visit.destination.slice(0, MAX_AGGREGATE_VALUE)],
  ]
}

interface Counts {
  clicks: number
  visitors: number
  bots: number
}

/** Sums counts under string keys, and gives them back sorted by key (the lock order). */
class Tally<K> {
  private readonly entries = new Map<string, { key: K; counts: Counts }>()

  add(id: string, key: K, visit: { bot: boolean; first: boolean }): void {
    let entry = this.entries.get(id)
    if (!entry) this.entries.set(id, (entry = { key, counts: { clicks: 0, visitors: 0, bots: 0 } }))
    if (visit.bot) entry.counts.bots++
    else {
      entry.counts.clicks++
      if (visit.first) entry.counts.visitors++
    }
  }

  sorted(): { key: K; counts: Counts }[] {
    return [...this.entries.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, entry]) => entry)
  }
}

/**
 * The first visit of the day by each visitor, of each link and of each workspace (scope: the uniq, or minus the
 * workspace id): what SeenToday did not hold before. Bots are not visitors.
 */
async function firstVisits(query: SqlQuery, visits: StoredVisit[]): Promise<{ link: boolean[]; workspace: boolean[] }> {
  const seen = new Map<string, { day: string; scope: number; visitor: string }>()
  for (const visit of visits) {
    if (visit.bot) continue
    const day = dayOf(visit.at)
    for (const scope of [visit.linkUniq, -visit.workspaceId]) seen.set(`${day}|${scope}|${visit.visitor}`, { day, scope, visitor: visit.visitor })
  }
  const rows = [...seen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row)
  const fresh = new Set<string>()
  if (rows.length > 0) {
    const inserted = await query<{ day: string; scope: number; visitor: string }>(
      `INSERT INTO "analytics"."SeenToday" ("day", "scope", "visitor")
       SELECT * FROM unnest($1::date[], $2::int[], $3::bigint[])
       ON CONFLICT DO NOTHING
       RETURNING "day"::text AS "day", "scope", "visitor"::text AS "visitor"`,
    [
      rows.map((row) => row.day),
      rows.map((row) => row.scope),
      rows.map((row) => row.visitor),
    ],
  )
    for (const row of inserted) fresh.add(`${row.day}|${row.scope}|${row.visitor}`)
  }
  // Only the first visit in the batch of a fresh (day, scope, visitor) is the first of the day.
  const first = (key: string) => fresh.delete(key)
  const link: boolean[] = []
  const workspace: boolean[] = []
  for (const visit of visits) {
    const day = dayOf(visit.at)
    link.push(!visit.bot && first(`${day}|${visit.linkUniq}|${visit.visitor}`))
    workspace.push(!visit.bot && first(`${day}|${-visit.workspaceId}|${visit.visitor}`))
  }
  return { link, workspace }
}

async function insertRaw(query: SqlQuery, visits: StoredVisit[], firstOfDay: boolean[]): Promise<void> {
  const column = <T>(pick: (visit: StoredVisit) => T) => visits.map(pick)
  await query(
    `INSERT INTO "analytics"."Visit" ("at", "linkUniq", "workspaceId", "domain", "country", "referrerHost", "device", "os",
       "browser", "destination", "reason", "answer", "bot", "visitor", "firstOfDay")
     SELECT * FROM unnest($1::timestamptz[], $2::int[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
       $9::text[], $10::text[], $11::text[], $12::text[], $13::boolean[], $14::bigint[], $15::boolean[])`,
    [
      column((visit) => visit.at.toISOString()),
      column((visit) => visit.linkUniq),
      column((visit) => visit.workspaceId),
      column((visit) => visit.domain),
      column((visit) => visit.country),
      column((visit) => visit.referrerHost),
      column((visit) => visit.device),
      column((visit) => visit.os),
      column((visit) => visit.browser),
      column((visit) => visit.destination),
      column((visit) => visit.reason),
      column((visit) => visit.answer),
      column((visit) => visit.bot),
      column((visit) => visit.visitor),
      firstOfDay,
    ],
  )
}

const counted = (entries: { counts: Counts }[]) => ({
  clicks: entries.map((entry) => entry.counts.clicks),
  visitors: entries.map((entry) => entry.counts.visitors),
  bots: entries.map((entry) => entry.counts.bots),
})

async function addLinkHourly(query: SqlQuery, visits: StoredVisit[], first: boolean[]): Promise<void> {
  const tally = new Tally<{ uniq: number; dimension: Dimension; hour: string; value: string }>()
  visits.forEach((visit, i) => {
    const hour = hourOf(visit.at)
    for (const [dimension, value] of dimensionValues(visit)) {
      tally.add(`${visit.linkUniq}|${dimension}|${hour}|${value}`, { uniq: visit.linkUniq, dimension, hour, value }, { bot: visit.bot, first: first[i] })
    }
  })
  const rows = tally.sorted()
  const { clicks, visitors, bots } = counted(rows)
  await query(
    `INSERT INTO "analytics"."LinkHourly" ("linkUniq", "dimension", "hour", "value", "clicks", "visitors", "bots")
     SELECT * FROM unnest($1::int[], $2::text[], $3::timestamptz[], $4::text[], $5::int[], $6::int[], $7::int[])
     ON CONFLICT ("linkUniq", "dimension", "hour", "value") DO UPDATE SET
       "clicks" = "LinkHourly"."clicks" + EXCLUDED."clicks",
       "visitors" = "LinkHourly"."visitors" + EXCLUDED."visitors",
       "bots" = "LinkHourly"."bots" + EXCLUDED."bots"`,
    [
      rows.map((row) => row.key.uniq),
      rows.map((row) => row.key.dimension),
      rows.map((row) => row.key.hour),
      rows.map((row) => row.key.value),
      clicks,
      visitors,
      bots,
    ],
  )
}

async function addWorkspaceHourly(query: SqlQuery, visits: StoredVisit[], first: boolean[]): Promise<void> {
  const tally = new Tally<{ workspaceId: number; dimension: Dimension; hour: string; domain: string; value: string }>()
  visits.forEach((visit, i) => {
    const hour = hourOf(visit.at)
    const values: [Dimension, string][] = [...dimensionValues(visit), ['link', String(visit.linkUniq)]]
    for (const [dimension, value] of values) {
      tally.add(
        `${visit.workspaceId}|${dimension}|${hour}|${visit.domain}|${value}`,
        { workspaceId: visit.workspaceId, dimension, hour, domain: visit.domain, value },
        { bot: visit.bot, first: first[i] },
      )
    }
  })
  const rows = tally.sorted()
  const { clicks, visitors, bots } = counted(rows)
  await query(
    `INSERT INTO "analytics"."WorkspaceHourly" ("workspaceId", "dimension", "hour", "domain", "value", "clicks", "visitors", "bots")
     SELECT * FROM unnest($1::int[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[])
     ON CONFLICT ("workspaceId", "dimension", "hour", "domain", "value") DO UPDATE SET
       "clicks" = "WorkspaceHourly"."clicks" + EXCLUDED."clicks",
       "visitors" = "WorkspaceHourly"."visitors" + EXCLUDED."visitors",
       "bots" = "WorkspaceHourly"."bots" + EXCLUDED."bots"`,
    [
      rows.map((row) => row.key.workspaceId),
      rows.map((row) => row.key.dimension),
      rows.map((row) => row.key.hour),
      rows.map((row) => row.key.domain),
      rows.map((row) => row.key.value),
      clicks,
      visitors,
      bots,
    ],
  )
}

async function addLinkClicks(query: SqlQuery, visits: StoredVisit[]): Promise<void> {
  const clicks = new Map<number, number>()
  for (const visit of visits) if (!visit.bot) clicks.set(visit.linkUniq, (clicks.get(visit.linkUniq) ?? 0) + 1)
  if (clicks.size === 0) return
  const rows = [...clicks.entries()].sort(([a], [b]) => a - b)
  await query(
    `INSERT INTO "analytics"."LinkClicks" ("linkUniq", "clicks")
     SELECT * FROM unnest($1::int[], $2::bigint[])
     ON CONFLICT ("linkUniq") DO UPDATE SET "clicks" = "LinkClicks"."clicks" + EXCLUDED."clicks"`,
    [
      rows.map(([uniq]) => uniq),
      rows.map(([, count]) => count),
    ],
  )
}

/** Stores a batch of visits and counts them in every aggregate, in one transaction. */
export async function storeVisits(database: Database, visits: StoredVisit[]): Promise<void> {
  if (visits.length === 0) return
  await ensurePartitionsFor(database.prisma, visits.map((visit) => visit.at))
  await database.transaction(async (query) => {
    const first = await firstVisits(query, visits)
    await insertRaw(query, visits, first.link)
    await addLinkHourly(query, visits, first.link)
    await addWorkspaceHourly(query, visits, first.workspace)
    await addLinkClicks(query, visits)
  })
}
