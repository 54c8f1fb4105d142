/** All-time clicks of links, for their records: one indexed read (LinkClicks' primary key) per page of links. */
import type { PrismaClient } from '../db/database.js'

/** The clicks of each of `uniqs`; a link never visited is absent (0). */
export async function clicksOf(prisma: PrismaClient, uniqs: number[]): Promise<Map<number, number>> {
  const clicks = new Map<number, number>()
  if (uniqs.length === 0) return clicks
  const rows = await prisma.$queryRawUnsafe<{ linkUniq: number; clicks: bigint }[]>(
    'SELECT "linkUniq", "clicks" FROM "analytics"."LinkClicks" WHERE "linkUniq" = ANY($1::int[])',
    uniqs,
  )
  for (const row of rows) clicks.set(row.linkUniq, Number(row.clicks))
  return clicks
}
