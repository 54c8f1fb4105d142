/**
 * All-time clicks of links, for their records, in one statement per page of links: LinkClicks (by its primary
 * key) holds what was rolled up, and the links' raw visits since "rolledUpTo" (a minute or so, by the
 * (linkUniq, at) index) the rest.
 */
import type { PrismaClient } from '../db/database.js'

/** The clicks of each of `uniqs`; a link never visited is absent (0). */
export async function clicksOf(prisma: PrismaClient, uniqs: number[]): Promise<Map<number, number>> {
  const clicks = new Map<number, number>()
  if (uniqs.length === 0) return clicks
  const rows = await prisma.$queryRawUnsafe<{ linkUniq: number; clicks: bigint }[]>(
    `SELECT u."linkUniq", coalesce(c."clicks", 0) + (
       SELECT count(*) FROM "analytics"."Visit" v
       WHERE v."linkUniq" = u."linkUniq" AND NOT v."bot" AND v."at" >= (SELECT "rolledUpTo" FROM "analytics"."Rollup")
     ) AS "clicks"
     FROM unnest($1::int[]) AS u("linkUniq") LEFT JOIN "analytics"."LinkClicks" c ON c."linkUniq" = u."linkUniq"`,
    uniqs,
  )
  for (const row of rows) if (Number(row.clicks) > 0) clicks.set(row.linkUniq, Number(row.clicks))
  return clicks
}
