/**
 * A link's raw visits, newest first, in keyset pages on ("at", "seq"): "seq" (migration 20261123100000) makes
 * the position unique. Visits stored while a client pages land before its position, or at an older "at" when
 * the recorder flushes them late; either way no visit is seen twice and none that existed is skipped.
 */
import { createHash } from 'node:crypto'
import { VISITS_LIMIT, type VisitBody, type VisitsRequest } from '../../schemas/stats.js'
import type { PrismaClient } from '../db/database.js'
import { fieldError } from '../errors/app-error.js'
import { exactInstant, parseInstant, STATS_INSTANTS } from './stats-range.js'

interface Position {
  /** "at" in microseconds since the epoch (PostgreSQL's precision), as decimal text. */
  t: string
  s: string
  /** The link and the from/to whose pages the position is of: another's would silently skip or repeat visits. */
  l: number
  r: string
}

/** Opaque to clients, like the link list's cursor: base64url of a small JSON object. */
function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url')
}

function decodeCursor(cursor: string, of: Pick<Position, 'l' | 'r'>): Position {
  let position: Partial<Position> | undefined
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error('not base64url')
    position = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as Partial<Position>
  } catch {
    position = undefined
  }
  const digits = (value: unknown) => typeof value === 'string' && /^[0-9]{1,18}$/.test(value)
  // A position of a visit lies where visits can: PostgreSQL refuses an instant far outside that.
  const possibleInstant = (micros: string) =>
    BigInt(micros) >= BigInt(STATS_INSTANTS.earliest) * 1000n && BigInt(micros) <= BigInt(STATS_INSTANTS.latest) * 1000n
  if (!position || !digits(position.t) || !digits(position.s) || !possibleInstant(position.t!) || position.l !== of.l || position.r !== of.r) {
    throw fieldError('/cursor', 'is not the nextCursor of a page of these visits (this link, from and to)')
  }
  return { t: position.t!, s: position.s!, ...of }
}

/** A short tag of a page's from/to (a cursor stays well within its 200 characters). */
const rangeTag = (from: string | false | undefined, to: string | false | undefined) =>
  createHash('sha256').update(`${from || ''}/${to || ''}`).digest('base64url').slice(0, 11)

interface VisitRow extends Omit<VisitBody, 'at'> {
  at: Date
  micros: string
  seq: string
}

export async function listVisits(
  prisma: PrismaClient,
  linkUniq: number,
  query: VisitsRequest,
  /** The retention's start (retentionStart): older visits, not yet dropped with their month, are not listed. */
  keptFrom: Date,
): Promise<{ visits: VisitBody[]; nextCursor: string | null }> {
  // Validated, then sent with every digit: visits are stored to the microsecond.
  const from = parseInstant(query.from, '/from') && exactInstant(query.from!)
  const to = parseInstant(query.to, '/to') && exactInstant(query.to!)
  if (from && to && from >= to) throw fieldError('/from', 'must be before to')
  const pages = { l: linkUniq, r: rangeTag(from, to) }
  const position = query.cursor === undefined ? undefined : decodeCursor(query.cursor, pages)
  const limit = query.limit ?? VISITS_LIMIT.default

  const params: unknown[] = [linkUniq, keptFrom.toISOString()]
  const conditions = ['"linkUniq" = $1::int', '"at" >= $2::timestamptz']
  if (from) conditions.push(`"at" >= $${params.push(from)}::timestamptz`)
  if (to) conditions.push(`"at" < $${params.push(to)}::timestamptz`)
  if (position) {
    const at = `'epoch'::timestamptz + $${params.push(position.t)}::int8 * interval '1 microsecond'`
    conditions.push(`("at", "seq") < (${at}, $${params.push(position.s)}::int8)`)
  }
  // One visit more than the page tells whether another page follows. The order names the table's columns: by the
  // output's "seq" (text, for JavaScript) '9' came after '15', and the cursor then skipped visits.
  const rows = await prisma.$queryRawUnsafe<VisitRow[]>(
    `SELECT v."at", ((extract(epoch FROM v."at") * 1000000)::int8)::text AS "micros", v."seq"::text AS "seq",
            v."country", v."referrerHost", v."device", v."os", v."browser", v."destination", v."reason", v."answer", v."bot"
     FROM "analytics"."Visit" v
     WHERE ${conditions.join(' AND ')}
     ORDER BY v."at" DESC, v."seq" DESC
     LIMIT $${params.push(limit + 1)}::int`,
    ...params,
  )
  const page = rows.slice(0, limit)
  const last = page[page.length - 1]
  return {
    visits: page.map(({ micros: _micros, seq: _seq, at, ...visit }) => ({ at: new Date(at).toISOString(), ...visit })),
    nextCursor: rows.length > limit ? encodeCursor({ t: last.micros, s: last.seq, ...pages }) : null,
  }
}
