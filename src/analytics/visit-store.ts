/**
 * Writes batches of visits (tables: prisma/migrations/20261123090000_visits and 20261124090000_visit_rollup): the
 * raw rows, and in the same transaction who was seen today (to tell first visits of the day, which is what
 * "unique visitors" counts). One transaction per batch, so a batch is stored wholly or not at all; a few
 * statements whatever the batch's size, through the driver (Database.transaction). A batch that fails (a
 * deadlock included) is tried again by the recorder, under the same id (VisitBatch), so it is never stored twice.
 *
 * The hourly and daily aggregates and the all-time clicks are not written here: src/analytics/visit-rollup.ts sums a
 * minute of raw rows at a time into them, which writes each (link, hour, value) row once a minute instead of once
 * a batch. A visit whose time was already rolled up when its batch arrives (a batch kept while the database was
 * down, a clock behind) is added to the aggregates by its batch, by the same statement (aggregateVisits). The
 * batch holds the rollup's row FOR SHARE throughout, so a rollup waits for it, and it for a rollup: every visit
 * is counted once, by one or the other.
 *
 * This runs for every visit the service answers, so it is written for the CPU it costs and for the event loop it
 * holds: the raw rows go by COPY, in chunks of CHUNK rows; the rest as JSON parameters (JSON.stringify is native;
 * the driver's array parameters cost a function call per element); visitors known to be seen today are not asked
 * about again.
 */
import { copyField } from '../db/copy-text.js'
import type { CopyIn, Database, SqlQuery } from '../db/database.js'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { ensurePartitionsFor, forgetPartitions, isMissingPartition } from './partitions.js'
import { aggregateVisitsSql } from './visit-aggregates.js'

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
 * A visit as it is sent to PostgreSQL (JSON, one object per row): `at` in milliseconds, and whether it is its
 * visitor's first of the day for the link and for the workspace (false until the batch finds out).
 */
export interface VisitRow extends Omit<StoredVisit, 'at'> {
  at: number
  firstOfDay: boolean
  firstOfWorkspaceDay: boolean
}

export const visitRow = (visit: StoredVisit): VisitRow => ({ ...visit, at: visit.at.getTime(), firstOfDay: false, firstOfWorkspaceDay: false })

/** Visits handled in one go before the event loop is let go (each costs a few microseconds). */
const CHUNK = 2000
const DAY_MS = 86_400_000
const SEP = '\u0001'

/** A batch's rows as sent (JSON, `at` in milliseconds), in the columns of analytics."Visit". */
const BATCH_ROWS = `SELECT to_timestamp(v."at" / 1000.0) AS "at", v."linkUniq", v."workspaceId", v."domain", v."country",
    v."referrerHost", v."device", v."os", v."browser", v."destination", v."reason", v."answer", v."bot",
    v."visitor"::bigint AS "visitor", v."firstOfDay", v."firstOfWorkspaceDay"
  FROM json_to_recordset($1::json) AS v("at" float8, "linkUniq" int, "workspaceId" int, "domain" text, "country" text,
    "referrerHost" text, "device" text, "os" text, "browser" text, "destination" text, "reason" text, "answer" text,
    "bot" boolean, "visitor" text, "firstOfDay" boolean, "firstOfWorkspaceDay" boolean)`

const byKey = <T>(entries: Map<string, T>) => [...entries.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, value]) => value)

/**
 * The (day, scope, visitor) triples known to be in SeenToday, per database: they need no round trip. Added only
 * once their transaction committed; bounded (cleared when full: the cost is asking again).
 */
const seenCache = new WeakMap<Database, Set<string>>()
const MAX_SEEN_CACHED = 200_000

/**
 * Marks the visits that are the first of the day by their visitor, of their link and of their workspace (scope:
 * the uniq, or minus the workspace id): what neither the cache nor SeenToday held. Bots are not visitors. Returns
 * the triples to remember once the transaction commits.
 */
async function markFirstVisits(query: SqlQuery, rows: VisitRow[], seen: Set<string>): Promise<string[]> {
  const asked = new Map<string, { day: number; scope: number; visitor: string; row: VisitRow; ofLink: boolean }>()
  const ask = (row: VisitRow, day: number, scope: number, ofLink: boolean) => {
    const key = `${day}${SEP}${scope}${SEP}${row.visitor}`
    if (!seen.has(key) && !asked.has(key)) asked.set(key, { day, scope, visitor: row.visitor, row, ofLink })
  }
  for (const [i, row] of rows.entries()) {
    if (i > 0 && i % CHUNK === 0) await nextTurn()
    if (row.bot) continue
    const day = Math.floor(row.at / DAY_MS)
    ask(row, day, row.linkUniq, true)
    ask(row, day, -row.workspaceId, false)
  }
  if (asked.size === 0) return []
  const triples = byKey(asked)
  const inserted = await query<{ day: number; scope: number; visitor: string }>(
    `INSERT INTO "analytics"."SeenToday" ("day", "scope", "visitor")
     SELECT DATE '1970-01-01' + d, s, v FROM unnest($1::int[], $2::int[], $3::bigint[]) AS t(d, s, v)
     ON CONFLICT DO NOTHING
     RETURNING ("day" - DATE '1970-01-01') AS "day", "scope", "visitor"::text AS "visitor"`,
    [triples.map((triple) => triple.day), triples.map((triple) => triple.scope), triples.map((triple) => triple.visitor)],
  )
  for (const row of inserted) {
    const entry = asked.get(`${row.day}${SEP}${row.scope}${SEP}${row.visitor}`)
    if (!entry) continue
    if (entry.ofLink) entry.row.firstOfDay = true
    else entry.row.firstOfWorkspaceDay = true
  }
  return [...asked.keys()]
}

const COPY_VISITS = `COPY "analytics"."Visit" ("at", "linkUniq", "workspaceId", "domain", "country", "referrerHost", "device",
  "os", "browser", "destination", "reason", "answer", "bot", "visitor", "firstOfDay", "firstOfWorkspaceDay") FROM STDIN`

const flag = (value: boolean) => (value ? 't' : 'f')

/**
 * The rows in COPY's text format (copy-text.ts), in COPY_VISITS's columns. Written out field by field, the numbers
 * and flags as they are and the time once per millisecond (visits of one millisecond are many under load): this runs
 * for every visit, and a row array per visit, joined, cost twice as much.
 */
function copyRows(rows: VisitRow[]): string {
  let data = ''
  let at = Number.NaN
  let time = ''
  for (const row of rows) {
    if (row.at !== at) time = new Date((at = row.at)).toISOString()
    data += `${time}\t${row.linkUniq}\t${row.workspaceId}\t${copyField(row.domain)}\t${copyField(row.country)}\t${copyField(row.referrerHost)}\t${copyField(row.device)}\t${copyField(row.os)}\t${copyField(row.browser)}\t${copyField(row.destination)}\t${row.reason}\t${row.answer}\t${flag(row.bot)}\t${row.visitor}\t${flag(row.firstOfDay)}\t${flag(row.firstOfWorkspaceDay)}\n`
  }
  return data
}

/**
 * The raw rows by COPY, in chunks of CHUNK rows with the event loop free in between (a third of what PostgreSQL
 * spent on the same rows as an INSERT from JSON: 60–72 against 180–220 ms for 20,000). Each chunk's visits from
 * before `rolledUpTo` (milliseconds; PostgreSQL decides to the microsecond) are added to the aggregates at once.
 */
async function insertRaw(query: SqlQuery, copyIn: CopyIn, rows: VisitRow[], rolledUpTo: number): Promise<void> {
  for (let start = 0; start < rows.length; start += CHUNK) {
    if (start > 0) await nextTurn()
    const chunk = rows.slice(start, start + CHUNK)
    await copyIn(COPY_VISITS, copyRows(chunk))
    const late = chunk.filter((row) => row.at <= rolledUpTo)
    if (late.length > 0) {
      await query(aggregateVisitsSql(`SELECT * FROM (${BATCH_ROWS}) b WHERE b."at" < (SELECT "rolledUpTo" FROM "analytics"."Rollup")`), [JSON.stringify(late)])
    }
  }
}

/** Stores a batch of visits, in one transaction. */
export function storeVisits(database: Database, visits: StoredVisit[]): Promise<void> {
  return storeVisitRows(database, visits.map(visitRow))
}

/**
 * storeVisits for visits already in the form they are sent in (the recorder makes them so). `batchId` names the
 * batch: one already stored under that id (its COMMIT went through, its answer was lost) is not stored again.
 */
export async function storeVisitRows(database: Database, rows: VisitRow[], batchId?: string): Promise<void> {
  if (rows.length === 0) return
  await ensurePartitionsFor(database.prisma, rows)
  let seen = seenCache.get(database)
  if (!seen || seen.size > MAX_SEEN_CACHED) seenCache.set(database, (seen = new Set()))
  const write = () => database.transaction(async (query, copyIn) => {
    // First: an attempt still under way with this id (its connection silent, not yet known to be lost) holds the
    // row, and this one waits to learn whether it committed.
    if (batchId !== undefined) {
      const claimed = await query(`INSERT INTO "analytics"."VisitBatch" ("id") VALUES ($1::uuid) ON CONFLICT DO NOTHING RETURNING 1`, [batchId])
      if (claimed.length === 0) return []
    }
    // Held until the batch commits: a rollup (which takes the row FOR UPDATE) waits for the batch, or the batch
    // for the rollup, so a visit is summed by exactly one of them.
    const [rollup] = await query<{ rolledUpTo: number }>(
      `SELECT extract(epoch FROM "rolledUpTo") * 1000 AS "rolledUpTo" FROM "analytics"."Rollup" FOR SHARE`,
    )
    for (const row of rows) row.firstOfDay = row.firstOfWorkspaceDay = false
    const remember = await markFirstVisits(query, rows, seen)
    await insertRaw(query, copyIn, rows, Math.ceil(Number(rollup.rolledUpTo)))
    return remember
  })
  let remember: string[]
  try {
    remember = await write()
  } catch (error) {
    // A partition this process created was dropped since by another instance's retention: created again.
    if (!isMissingPartition(error)) throw error
    forgetPartitions(database.prisma)
    await ensurePartitionsFor(database.prisma, rows)
    remember = await write()
  }
  for (const key of remember) seen.add(key)
}
