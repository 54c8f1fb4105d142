/**
 * Writes batches of visits (tables: prisma/migrations/20261123090000_visits): the raw rows, and in the same
 * transaction the hourly aggregates per link and per workspace, the all-time clicks of each link, and who was
 * seen today (to tell first visits of the day, which is what "unique visitors" counts). One transaction per
 * batch, so a batch is counted wholly or not at all; five statements whatever the batch's size, through the
 * driver (Database.transaction). A batch that fails (a deadlock included) is tried again by the recorder.
 *
 * This runs for every visit the service answers, so it is written for the CPU it costs and for the event loop it
 * holds: the raw rows go as JSON parameters (JSON.stringify is native; the driver's array parameters cost a
 * function call per element) in statements of CHUNK rows; visits are first summed by their combination of facts
 * (a second's visits of a link mostly share them, so a batch should hold a whole second: aggregate rows then
 * grow with the links visited, not with the visits); visitors known to be seen today are not asked about again.
 *
 * Aggregate rows are written in one sorted order: two instances flushing at once lock the rows they share in
 * the same order, so they wait for each other instead of deadlocking.
 */
import type { Database, SqlQuery } from '../db/database.js'
import { setImmediate as nextTurn } from 'node:timers/promises'
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

/**
 * Aggregate values are part of their table's key, and an index entry must stay well under PostgreSQL's 2,700
 * bytes: longer destinations are cut (two destinations equal over their first 1,024 characters count as one).
 */
export const MAX_AGGREGATE_VALUE = 1024

/** Visits handled in one go before the event loop is let go (each costs a few microseconds). */
const CHUNK = 2000
const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000
const SEP = '\u0001'

interface Counts {
  clicks: number
  visitors: number
  bots: number
}

/** Visits that share every fact the aggregates keep, summed. */
interface Combination {
  visit: StoredVisit
  hour: number
  link: Counts
  /** visitors: first visits of the workspace on the day (clicks and bots as for the link). */
  workspace: Counts
}

const byKey = <T>(entries: Map<string, T>) => [...entries.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, value]) => value)

/**
 * The (day, scope, visitor) triples known to be in SeenToday, per database: they need no round trip. Added only
 * once their transaction committed; bounded (cleared when full: the cost is asking again).
 */
const seenCache = new WeakMap<Database, Set<string>>()
const MAX_SEEN_CACHED = 200_000

/**
 * Which visits are the first of the day by their visitor, of their link and of their workspace (scope: the
 * uniq, or minus the workspace id): what neither the cache nor SeenToday held. Bots are not visitors. Returns
 * also the triples to remember once the transaction commits.
 */
async function firstVisits(query: SqlQuery, visits: StoredVisit[], seen: Set<string>) {
  const link: boolean[] = new Array(visits.length).fill(false)
  const workspace: boolean[] = new Array(visits.length).fill(false)
  const asked = new Map<string, { day: number; scope: number; visitor: string; firstAt: number; ofLink: boolean }>()
  for (const [i, visit] of visits.entries()) {
    if (i > 0 && i % CHUNK === 0) await nextTurn()
    if (visit.bot) continue
    const day = Math.floor(visit.at.getTime() / DAY_MS)
    for (const [scope, ofLink] of [[visit.linkUniq, true], [-visit.workspaceId, false]] as const) {
      const key = `${day}${SEP}${scope}${SEP}${visit.visitor}`
      if (seen.has(key) || asked.has(key)) continue
      asked.set(key, { day, scope, visitor: visit.visitor, firstAt: i, ofLink })
    }
  }
  if (asked.size === 0) return { link, workspace, remember: [] as string[] }
  const rows = byKey(asked)
  const inserted = await query<{ day: number; scope: number; visitor: string }>(
    `INSERT INTO "analytics"."SeenToday" ("day", "scope", "visitor")
     SELECT DATE '1970-01-01' + d, s, v FROM unnest($1::int[], $2::int[], $3::bigint[]) AS t(d, s, v)
     ON CONFLICT DO NOTHING
     RETURNING ("day" - DATE '1970-01-01') AS "day", "scope", "visitor"::text AS "visitor"`,
    [rows.map((row) => row.day), rows.map((row) => row.scope), rows.map((row) => row.visitor)],
  )
  for (const row of inserted) {
    const entry = asked.get(`${row.day}${SEP}${row.scope}${SEP}${row.visitor}`)
    if (entry) (entry.ofLink ? link : workspace)[entry.firstAt] = true
  }
  return { link, workspace, remember: [...asked.keys()] }
}

async function combine(visits: StoredVisit[], first: { link: boolean[]; workspace: boolean[] }): Promise<Combination[]> {
  const combinations = new Map<string, Combination>()
  for (const [i, visit] of visits.entries()) {
    if (i > 0 && i % CHUNK === 0) await nextTurn()
    const hour = visit.at.getTime() - (visit.at.getTime() % HOUR_MS)
    const key = [visit.linkUniq, hour, visit.country, visit.referrerHost, visit.device, visit.os, visit.browser, visit.destination, visit.domain].join(SEP)
    let combination = combinations.get(key)
    if (!combination) {
      combination = { visit, hour, link: { clicks: 0, visitors: 0, bots: 0 }, workspace: { clicks: 0, visitors: 0, bots: 0 } }
      combinations.set(key, combination)
    }
    for (const [counts, firstOfDay] of [[combination.link, first.link[i]], [combination.workspace, first.workspace[i]]] as const) {
      if (visit.bot) counts.bots++
      else {
        counts.clicks++
        if (firstOfDay) counts.visitors++
      }
    }
  }
  return [...combinations.values()]
}

/** The raw rows in statements of CHUNK rows, the event loop free in between. */
async function insertRaw(query: SqlQuery, visits: StoredVisit[], firstOfDay: boolean[]): Promise<void> {
  for (let start = 0; start < visits.length; start += CHUNK) {
    if (start > 0) await nextTurn()
    const rows = visits.slice(start, start + CHUNK).map((visit, i) => ({ ...visit, at: visit.at.getTime(), firstOfDay: firstOfDay[start + i] }))
    await insertRawRows(query, rows)
  }
}

async function insertRawRows(query: SqlQuery, rows: object[]): Promise<void> {
  await query(
    `INSERT INTO "analytics"."Visit" ("at", "linkUniq", "workspaceId", "domain", "country", "referrerHost", "device", "os",
       "browser", "destination", "reason", "answer", "bot", "visitor", "firstOfDay")
     SELECT to_timestamp(v."at" / 1000.0), v."linkUniq", v."workspaceId", v."domain", v."country", v."referrerHost", v."device",
       v."os", v."browser", v."destination", v."reason", v."answer", v."bot", v."visitor"::bigint, v."firstOfDay"
     FROM json_to_recordset($1::json) AS v("at" float8, "linkUniq" int, "workspaceId" int, "domain" text, "country" text,
       "referrerHost" text, "device" text, "os" text, "browser" text, "destination" text, "reason" text, "answer" text,
       "bot" boolean, "visitor" text, "firstOfDay" boolean)`,
    [JSON.stringify(rows)],
  )
}

/**
 * The summed combinations into every aggregate, in one statement: PostgreSQL spreads each combination over the
 * breakdowns and sums them (cheaper there than building those rows here and sending them). Rows are written in
 * key order, so two instances writing at once take their locks in the same order.
 */
async function addAggregates(query: SqlQuery, combinations: Combination[]): Promise<void> {
  const rows = combinations.map(({ visit, hour, link, workspace }) => ({
    linkUniq: visit.linkUniq,
    workspaceId: visit.workspaceId,
    domain: visit.domain,
    hour,
    country: visit.country ?? '',
    referrer: visit.referrerHost ?? '',
    device: visit.device,
    os: visit.os ?? '',
    browser: visit.browser ?? '',
    destination: visit.destination.slice(0, MAX_AGGREGATE_VALUE),
    clicks: link.clicks,
    bots: link.bots,
    linkVisitors: link.visitors,
    workspaceVisitors: workspace.visitors,
  }))
  await query(
    `WITH c AS (
       SELECT * FROM json_to_recordset($1::json) AS c("linkUniq" int, "workspaceId" int, "domain" text, "hour" float8,
         "country" text, "referrer" text, "device" text, "os" text, "browser" text, "destination" text,
         "clicks" int, "bots" int, "linkVisitors" int, "workspaceVisitors" int)
     ),
     breakdown AS (
       SELECT c.*, to_timestamp(c."hour" / 1000.0) AS "at", d."dimension", d."value"
       FROM c CROSS JOIN LATERAL (VALUES ('total', ''), ('country', c."country"), ('referrer', c."referrer"),
         ('device', c."device"), ('os', c."os"), ('browser', c."browser"), ('destination', c."destination")) AS d("dimension", "value")
     ),
     link_rows AS (
       INSERT INTO "analytics"."LinkHourly" ("linkUniq", "dimension", "hour", "value", "clicks", "visitors", "bots")
       SELECT "linkUniq", "dimension", "at", "value", sum("clicks"), sum("linkVisitors"), sum("bots")
       FROM breakdown GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
       ON CONFLICT ("linkUniq", "dimension", "hour", "value") DO UPDATE SET
         "clicks" = "LinkHourly"."clicks" + EXCLUDED."clicks",
         "visitors" = "LinkHourly"."visitors" + EXCLUDED."visitors",
         "bots" = "LinkHourly"."bots" + EXCLUDED."bots"
     ),
     workspace_rows AS (
       INSERT INTO "analytics"."WorkspaceHourly" ("workspaceId", "dimension", "hour", "domain", "value", "clicks", "visitors", "bots")
       SELECT "workspaceId", "dimension", "at", "domain", "value", sum("clicks"), sum("workspaceVisitors"), sum("bots")
       FROM (
         SELECT "workspaceId", "dimension", "at", "domain", "value", "clicks", "workspaceVisitors", "bots" FROM breakdown
         UNION ALL
         SELECT "workspaceId", 'link', to_timestamp("hour" / 1000.0), "domain", "linkUniq"::text, "clicks", "workspaceVisitors", "bots" FROM c
       ) AS w
       GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
       ON CONFLICT ("workspaceId", "dimension", "hour", "domain", "value") DO UPDATE SET
         "clicks" = "WorkspaceHourly"."clicks" + EXCLUDED."clicks",
         "visitors" = "WorkspaceHourly"."visitors" + EXCLUDED."visitors",
         "bots" = "WorkspaceHourly"."bots" + EXCLUDED."bots"
     )
     INSERT INTO "analytics"."LinkClicks" ("linkUniq", "clicks")
     SELECT "linkUniq", sum("clicks") FROM c GROUP BY 1 HAVING sum("clicks") > 0 ORDER BY 1
     ON CONFLICT ("linkUniq") DO UPDATE SET "clicks" = "LinkClicks"."clicks" + EXCLUDED."clicks"`,
    [JSON.stringify(rows)],
  )
}

/** Stores a batch of visits and counts them in every aggregate, in one transaction. */
export async function storeVisits(database: Database, visits: StoredVisit[]): Promise<void> {
  if (visits.length === 0) return
  await ensurePartitionsFor(database.prisma, visits.map((visit) => visit.at))
  let seen = seenCache.get(database)
  if (!seen || seen.size > MAX_SEEN_CACHED) seenCache.set(database, (seen = new Set()))
  const remember = await database.transaction(async (query) => {
    const first = await firstVisits(query, visits, seen)
    // Each step's work in JavaScript holds the event loop; visitors' requests go in between.
    await insertRaw(query, visits, first.link)
    await nextTurn()
    const combinations = await combine(visits, first)
    await nextTurn()
    await addAggregates(query, combinations)
    return first.remember
  })
  for (const key of remember) seen.add(key)
}
