/**
 * A link's history in the group aggregates (GroupHourly, GroupDaily: migration 20261126090000_group_aggregates).
 * A tag or folder filter means "the visits of the links that have this tag / are in this folder now", so when a
 * link's tags or folder change, or the link is deleted, its aggregated visits move with it: its LinkHourly and
 * LinkDaily rows are subtracted from the groups it left and added to the groups it joined.
 *
 * Every writer of the group rows holds analytics."Rollup": the rollup FOR UPDATE, a batch of late visits FOR SHARE
 * (visit-rollup.ts, visit-store.ts), a move FOR UPDATE (lockRollup), taken before the link's row. So a link's
 * aggregates cannot grow between the move reading them and its commit, and the first rollup after the commit sums
 * the link's newer visits into its new groups: no visit is counted twice or lost. The old groups are those of the
 * link's row as locked in the same transaction, never as the request read it earlier (a concurrent update may
 * have changed them since).
 */
import { AGGREGATE_TIERS, type AggregateTier } from './visit-aggregates.js'

/** A statement on the transaction's connection, however the caller holds it (a Prisma transaction or Database.transaction). */
export type Run = (sql: string, params: unknown[]) => Promise<unknown[]>

/** What decides a link's groups, as "Link" stores it. */
export interface GroupedLink {
  uniq: number
  workspaceId: number
  domain: string
  tagKeys: string[] | null
  folderId: number | null
}

/** The columns of "Link" that GroupedLink reads. */
export const GROUPED_LINK_COLUMNS = '"uniq", "workspaceId", "domain", "tagKeys", "folderId"'

/** The link's groups, as "kind\u0000value"; linkGroupsSql (visit-aggregates.ts) is the same in SQL. */
function groupsOf(link: GroupedLink | null): string[] {
  if (!link) return []
  const groups = new Set((link.tagKeys ?? []).map((tag) => `tag\u0000${tag}`))
  if (link.folderId !== null) groups.add(`folder\u0000${link.folderId}`)
  return [...groups]
}

/** A condition on "Link" that holds when the link is in no group (groupsOf is empty): it has no history to move. */
export const IN_NO_GROUP_SQL = `("tagKeys" IS NULL OR "tagKeys" = '{}') AND "folderId" IS NULL`

/** Whether an update of these fields may change the link's groups (and so must take the rollup's row first). */
export const changesGroups = (changes: { tags?: unknown; folderId?: unknown }) => changes.tags !== undefined || changes.folderId !== undefined

/** Takes analytics."Rollup" FOR UPDATE: call it first in the transaction, before the link's row is locked or changed. */
export async function lockRollup(run: Run): Promise<void> {
  await run(`SELECT true AS "locked" FROM "analytics"."Rollup" FOR UPDATE`, [])
}

/** The moves, one row per link and group it left (sign -1) or joined (+1). */
const MOVES = `SELECT * FROM unnest($1::int[], $2::int[], $3::text[], $4::text[], $5::text[], $6::int[])
  AS m("linkUniq", "workspaceId", "domain", "groupKind", "groupValue", "sign")`

/** The moved links' rows of a tier as rows of their groups, signed; the link dimension as the rollup writes it. */
function movedRows(tier: AggregateTier): string {
  const counts = `m."sign" * r."clicks" AS "clicks", m."sign" * r."visitors" AS "visitors", m."sign" * r."bots" AS "bots"`
  return `SELECT m."workspaceId", m."groupKind", m."groupValue", r."dimension", r.${tier.time}, m."domain", r."value", ${counts}
      FROM (${MOVES}) m JOIN "analytics"."Link${tier.suffix}" r ON r."linkUniq" = m."linkUniq"
    UNION ALL
    SELECT m."workspaceId", m."groupKind", m."groupValue", 'link', r.${tier.time}, m."domain", r."linkUniq"::text, ${counts}
      FROM (${MOVES}) m JOIN "analytics"."Link${tier.suffix}" r ON r."linkUniq" = m."linkUniq" AND r."dimension" = 'total'`
}

/**
 * One statement per tier: the moved rows summed per group row; the group rows they bring to zero deleted (a group
 * a link left keeps no trace of it); the others added to, or inserted. A move holds the rollup's row FOR UPDATE,
 * so no other writer of group rows runs meanwhile. Only a move out can bring a row to zero: without one
 * (`leaving` false) the delete and its anti-join are left out (a third of the time for a busy link).
 */
function moveSql(tier: AggregateTier, leaving: boolean): string {
  const table = `"analytics"."Group${tier.suffix}"`
  const keys = ['"workspaceId"', '"groupKind"', '"groupValue"', '"dimension"', tier.time, '"domain"', '"value"']
  const positions = keys.map((_, i) => i + 1).join(', ')
  const of = (alias: string) => keys.map((key) => `${alias}.${key}`).join(', ')
  return `WITH moved AS (
      SELECT ${keys.join(', ')}, sum("clicks") AS "clicks", sum("visitors") AS "visitors", sum("bots") AS "bots"
      FROM (${movedRows(tier)}) r GROUP BY ${positions}
    ),
    gone AS (
      DELETE FROM ${table} g USING moved m
      WHERE ${leaving} AND (${of('g')}) = (${of('m')})
        AND g."clicks" + m."clicks" = 0 AND g."visitors" + m."visitors" = 0 AND g."bots" + m."bots" = 0
      RETURNING ${of('g')}
    ),
    written AS (
      INSERT INTO ${table} (${keys.join(', ')}, "clicks", "visitors", "bots")
      SELECT ${of('m')}, m."clicks", m."visitors", m."bots" FROM moved m
      ${leaving ? `WHERE NOT EXISTS (SELECT 1 FROM gone WHERE (${of('gone')}) = (${of('m')}))` : ''}
      ORDER BY ${positions}
      ON CONFLICT (${keys.join(', ')}) DO UPDATE SET
        "clicks" = "Group${tier.suffix}"."clicks" + EXCLUDED."clicks",
        "visitors" = "Group${tier.suffix}"."visitors" + EXCLUDED."visitors",
        "bots" = "Group${tier.suffix}"."bots" + EXCLUDED."bots"
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone)::int AS "deleted", (SELECT count(*) FROM written)::int AS "written"`
}

/**
 * Moves the history of each link from the groups of `before` to those of `after` (null: the link did not exist /
 * was deleted), in the caller's transaction, which holds the rollup's row (lockRollup).
 */
export async function moveGroupHistory(run: Run, changes: { before: GroupedLink | null; after: GroupedLink | null }[]): Promise<void> {
  const columns: [number[], number[], string[], string[], string[], number[]] = [[], [], [], [], [], []]
  const add = (link: GroupedLink, group: string, sign: number) => {
    const [kind, value] = group.split('\u0000')
    ;[link.uniq, link.workspaceId, link.domain, kind, value, sign].forEach((item, i) => (columns[i] as unknown[]).push(item))
  }
  for (const { before, after } of changes) {
    const [left, joined] = [groupsOf(before), groupsOf(after)]
    for (const group of left) if (!joined.includes(group)) add(before!, group, -1)
    for (const group of joined) if (!left.includes(group)) add(after!, group, 1)
  }
  if (columns[0].length === 0) return
  const leaving = columns[5].some((sign) => sign < 0)
  for (const tier of AGGREGATE_TIERS) await run(moveSql(tier, leaving), columns)
}
