/**
 * Sums the raw visits into the hourly and daily aggregates, a span at a time, from analytics."Rollup"."rolledUpTo" up to a
 * few seconds ago (ROLLUP_GRACE_MS: visits still in an instance's buffer then mostly have a later time). Writing the aggregates
 * here rather than with every batch is what keeps recording cheap: a link visited every second of a minute gets
 * its seven breakdown rows written once for that minute, not sixty times, and every row is one set-based
 * statement's work for PostgreSQL.
 *
 * Every instance runs it on a timer; the rollup row, taken FOR UPDATE, makes them take turns, and one that finds
 * the span already done does nothing. Batches hold the same row FOR SHARE (visit-store.ts), so the rollup waits
 * for those under way and sees their visits; a batch that comes after adds the visits of a span already rolled up
 * itself. A change of a link's tags or folder takes the row FOR UPDATE too, to move the link's history between the
 * group aggregates (group-history.ts). Stats read the aggregates before "rolledUpTo" and the raw visits from it
 * (stats-queries.ts).
 */
import { LONG_STATEMENT_TIMEOUT_MS, type Database } from '../db/database.js'
import { aggregateVisitsSql } from './visit-aggregates.js'

export interface RollupOptions {
  /** The longest span summed in one statement (after an outage, the backlog goes in steps). */
  maxSpanMs?: number
  /**
   * About the most visits summed in one step (default MAX_STEP_VISITS): a step holds the rollup's row, which every
   * batch of visits and every change of a link's tags or folder waits for, so a backlog goes in short steps.
   */
  maxVisits?: number
  /** A span shorter than this is left for the next time (another instance has just rolled up). */
  minSpanMs?: number
}

export interface RollupResult {
  /** The visits summed (bots included). */
  visits: number
  /** The new "rolledUpTo", or null when nothing was due. */
  rolledUpTo: Date | null
}

/** How far behind the clock the rollup stays: visits still buffered in instances mostly have a later time. */
export const ROLLUP_GRACE_MS = 5_000
const MAX_SPAN_MS = 3_600_000
/**
 * A few seconds of the rollup's work (10–25 µs a visit in `npm run bench:redirect`), at any rate of visits; a minute
 * of up to 3,000 visits a second is still one step. (At 50,000, the bench's 5 s runs took two steps and the
 * rollup cost 18–23 µs a visit against 10–15: each step writes the rows of the links it saw again.)
 */
export const MAX_STEP_VISITS = 200_000

/**
 * One step of the rollup, in one transaction; `rollUpVisits` repeats it until `upTo`. A span longer than a step
 * starts at its first visit, so a stretch without visits (a clock that jumped) costs no steps.
 */
async function rollUpOnce(database: Database, upTo: Date, options: RollupOptions): Promise<RollupResult & { more: boolean }> {
  const { maxSpanMs = MAX_SPAN_MS, minSpanMs = 0, maxVisits = MAX_STEP_VISITS } = options
  return database.transaction(async (query) => {
    // Times go back and forth as text: a JavaScript Date would drop the microseconds. The step ends at the earliest
    // of: upTo, maxSpanMs after its first visit, and the time of the (maxVisits + 1)th visit after "rolledUpTo" (found
    // on the index on "at"; strictly after, so that a step always moves on, however many visits share an instant).
    // Whether it is due is decided without that cut: a busy span is due however short its steps.
    const [span] = await query<{ from: string; to: string; due: boolean; more: boolean }>(
      `SELECT r."rolledUpTo"::text AS "from", s."to"::text AS "to", e."end" - r."rolledUpTo" >= $3 * interval '1 millisecond' AS "due",
              s."to" < $1::timestamptz AS "more"
       FROM "analytics"."Rollup" r,
            LATERAL (SELECT CASE WHEN $1::timestamptz - r."rolledUpTo" <= $2 * interval '1 millisecond' THEN $1::timestamptz
              ELSE least($1::timestamptz, coalesce(
                (SELECT min(v."at") FROM "analytics"."Visit" v WHERE v."at" >= r."rolledUpTo" AND v."at" < $1::timestamptz),
                $1::timestamptz) + $2 * interval '1 millisecond') END AS "end") e,
            LATERAL (SELECT least(e."end", coalesce(
                (SELECT v."at" FROM "analytics"."Visit" v WHERE v."at" > r."rolledUpTo" AND v."at" < e."end" ORDER BY v."at" OFFSET $4 LIMIT 1),
                e."end")) AS "to") s
       FOR UPDATE OF r`,
      [upTo.toISOString(), maxSpanMs, Math.max(minSpanMs, 0.001), maxVisits],
    )
    if (!span?.due) return { visits: 0, rolledUpTo: null, more: false }
    // The span's raw visits are found by the index on "at", never by reading the month's partition whole
    // (a partition not analysed yet can look too small to bother), and grouped in memory, not on disk.
    await query(`SET LOCAL enable_seqscan = off`)
    await query(`SET LOCAL work_mem = '64MB'`)
    const [summed] = await query<{ visits: string | number }>(
      aggregateVisitsSql(`SELECT * FROM "analytics"."Visit" WHERE "at" >= $1::timestamptz AND "at" < $2::timestamptz`),
      [span.from, span.to],
    )
    await query(`UPDATE "analytics"."Rollup" SET "rolledUpTo" = $1::timestamptz`, [span.to])
    return { visits: Number(summed.visits), rolledUpTo: new Date(span.to), more: span.more }
  }, { statementTimeoutMs: LONG_STATEMENT_TIMEOUT_MS })
}

/** Sums every raw visit before `upTo` not summed yet; returns how many and where it stopped. */
export async function rollUpVisits(database: Database, upTo: Date, options: RollupOptions = {}): Promise<RollupResult> {
  const total: RollupResult = { visits: 0, rolledUpTo: null }
  for (;;) {
    const step = await rollUpOnce(database, upTo, options)
    total.visits += step.visits
    total.rolledUpTo = step.rolledUpTo ?? total.rolledUpTo
    if (!step.more) return total
  }
}
