/**
 * All-time clicks of links, for their records: LinkClicks (by its primary key) holds what was rolled up, and
 * the link's raw visits since "rolledUpTo" (a minute or so, by the (linkUniq, at) index) the rest.
 */
import type { PrismaClient } from '../db/database.js'

/**
 * The clicks of the link whose uniq is `linkUniq` (an SQL expression), as a bigint: a column of the statement
 * that reads links, so that a read or a list costs no statement of its own for them (link-repository.ts).
 */
export function clicksSql(linkUniq: string): string {
  return `(coalesce((SELECT c."clicks" FROM "analytics"."LinkClicks" c WHERE c."linkUniq" = ${linkUniq}), 0) + (
     SELECT count(*) FROM "analytics"."Visit" v
     WHERE v."linkUniq" = ${linkUniq} AND NOT v."bot" AND v."at" >= (SELECT "rolledUpTo" FROM "analytics"."Rollup")))`
}

/** The clicks of each of `uniqs`, in one statement; a link never visited is absent (0). */
export async function clicksOf(prisma: PrismaClient, uniqs: number[]): Promise<Map<number, number>> {
  const clicks = new Map<number, number>()
  if (uniqs.length === 0) return clicks
  const rows = await prisma.$queryRawUnsafe<{ linkUniq: number; clicks: bigint }[]>(
    `SELECT u."linkUniq", ${clicksSql('u."linkUniq"')} AS "clicks" FROM unnest($1::int[]) AS u("linkUniq")`,
    uniqs,
  )
  for (const row of rows) if (Number(row.clicks) > 0) clicks.set(row.linkUniq, Number(row.clicks))
  return clicks
}
