/**
 * The one statement that adds visits to the aggregates, hourly (LinkHourly, WorkspaceHourly, GroupHourly) and daily
 * (LinkDaily, WorkspaceDaily, GroupDaily), and to the links' all-time clicks (LinkClicks); it answers one row, the
 * number of visits it added. Its visits come from `source`, any SELECT giving analytics."Visit"'s columns: a minute of raw rows for
 * the rollup (visit-rollup.ts), or a batch's late visits (visit-store.ts).
 *
 * PostgreSQL sums the visits by their combination of facts, spreads each combination over the breakdowns and sums
 * again: cheaper there than building those rows in JavaScript and sending them. Rows are written in key order,
 * so two writers at once take their row locks in the same order and wait for each other instead of deadlocking.
 * Hours and days are cut in UTC (a zone with a half-hour offset would cut them elsewhere); both tiers are written
 * together, so they always hold the same visits, and stats may read a whole UTC day from either. A visit goes into
 * the groups (tags, folder) of its link as the link is at that moment; changes of them later move the link's
 * history (group-history.ts), and both hold analytics."Rollup" to take turns.
 */

/**
 * Aggregate values are part of their table's key, and an index entry must stay well under PostgreSQL's 2,704
 * bytes, or the statement fails, and with it the rollup of every workspace's visits, minute after minute. So a
 * value longer than this many bytes (UTF-8) is cut to a prefix that fits, whole characters only (two values equal
 * over that prefix count as one). Bytes, not characters: a destination of 1,024 CJK characters is
 * 3 KB, and so is a Referer's host of 3,000 letters (URL parsing sets no length) or a User-Agent's unknown browser
 * name of 2,000 characters past U+007F (a header's bytes are read as Latin-1, two bytes each in UTF-8).
 */
export const MAX_AGGREGATE_BYTES = 1024

/**
 * `value` (an SQL expression, evaluated several times: keep it a column) cut to MAX_AGGREGATE_BYTES as an aggregate
 * stores it. The common case is one octet_length. A longer value keeps MAX_AGGREGATE_BYTES characters if they fit,
 * else half as many if they fit (two bytes a character), else a third (three), else a quarter, which always fits
 * (at most four bytes a character): not always the longest prefix that fits, but the same cut of the same value
 * everywhere, without a subquery per row (one that searched for the longest prefix made the rollup of 100,000
 * visits a third slower: 6.9–10.5 s against 5.2–7.4 s with these cases, the same as without any cut).
 */
export function aggregateValueSql(value: string): string {
  const max = MAX_AGGREGATE_BYTES
  const fits = (characters: number) => `WHEN octet_length(left(${value}, ${characters})) <= ${max} THEN left(${value}, ${characters})`
  return `(CASE WHEN octet_length(${value}) <= ${max} THEN ${value} ${fits(max)} ${fits(max / 2)} ${fits(Math.floor(max / 3))} ELSE left(${value}, ${max / 4}) END)`
}

/** The two tiers of aggregates: the time column of each and how a visit's hour is cut to it. */
export const AGGREGATE_TIERS = [
  { suffix: 'Hourly', time: '"hour"', cut: (hour: string) => hour },
  { suffix: 'Daily', time: '"day"', cut: (hour: string) => `date_trunc('day', ${hour}, 'UTC')` },
] as const
export type AggregateTier = (typeof AGGREGATE_TIERS)[number]

/**
 * A link's groups (group-history.ts) as SQL rows ("groupKind", "groupValue") of the link aliased `l`: each tag
 * once (tagKeys are lower case), and its folder.
 */
export const linkGroupsSql = (l: string) => `(
  SELECT DISTINCT 'tag' AS "groupKind", t AS "groupValue" FROM unnest(${l}."tagKeys") AS t
  UNION ALL
  SELECT 'folder', ${l}."folderId"::text WHERE ${l}."folderId" IS NOT NULL)`

/**
 * An upsert of rows summed from `rows` (with an "hour" column) into one table of a tier: `keys` before the time
 * column, `after` between it and "value"; `visitors` names the column of `rows` that counts that table's visitors.
 */
function upsert(table: string, tier: AggregateTier, keys: string[], after: string[], visitors: string, rows: string): string {
  const columns = [...keys, '"dimension"', tier.time, ...after, '"value"']
  const selected = [...keys, '"dimension"', tier.cut('"hour"'), ...after, '"value"']
  const positions = columns.map((_, i) => i + 1).join(', ')
  return `INSERT INTO "analytics"."${table}" (${columns.join(', ')}, "clicks", "visitors", "bots")
       SELECT ${selected.join(', ')}, sum("clicks"), sum(${visitors}), sum("bots")
       FROM ${rows} GROUP BY ${positions} ORDER BY ${positions}
       ON CONFLICT (${columns.join(', ')}) DO UPDATE SET
         "clicks" = "${table}"."clicks" + EXCLUDED."clicks",
         "visitors" = "${table}"."visitors" + EXCLUDED."visitors",
         "bots" = "${table}"."bots" + EXCLUDED."bots"`
}

export function aggregateVisitsSql(source: string): string {
  const tiers = AGGREGATE_TIERS.map(
    (tier) => `link_${tier.suffix} AS (
       ${upsert(`Link${tier.suffix}`, tier, ['"linkUniq"'], [], '"linkVisitors"', 'breakdown')}
     ),
     workspace_${tier.suffix} AS (
       ${upsert(`Workspace${tier.suffix}`, tier, ['"workspaceId"'], ['"domain"'], '"workspaceVisitors"', 'workspace')}
     ),
     group_${tier.suffix} AS (
       ${upsert(`Group${tier.suffix}`, tier, ['"workspaceId"', '"groupKind"', '"groupValue"'], ['"domain"'], '"linkVisitors"', 'grouped')}
     ),`,
  )
  return `WITH c AS (
       SELECT v."linkUniq", v."workspaceId", v."domain", date_trunc('hour', v."at", 'UTC') AS "hour",
         coalesce(v."country", '') AS "country", coalesce(${aggregateValueSql('v."referrerHost"')}, '') AS "referrer",
         v."device", coalesce(${aggregateValueSql('v."os"')}, '') AS "os",
         coalesce(${aggregateValueSql('v."browser"')}, '') AS "browser", ${aggregateValueSql('v."destination"')} AS "destination",
         count(*) FILTER (WHERE NOT v."bot") AS "clicks", count(*) FILTER (WHERE v."bot") AS "bots",
         count(*) FILTER (WHERE v."firstOfDay" AND NOT v."bot") AS "linkVisitors",
         count(*) FILTER (WHERE v."firstOfWorkspaceDay" AND NOT v."bot") AS "workspaceVisitors"
       FROM (${source}) v
       GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
     ),
     breakdown AS (
       SELECT c.*, d."dimension", d."value"
       FROM c CROSS JOIN LATERAL (VALUES ('total', ''), ('country', c."country"), ('referrer', c."referrer"),
         ('device', c."device"), ('os', c."os"), ('browser', c."browser"), ('destination', c."destination")) AS d("dimension", "value")
     ),
     -- The workspace's rows: every breakdown, and one more, link (value: the uniq), for the top links, whose
     -- visitors are each link's own (as its own stats count them), not the workspace's first visits.
     workspace AS (
       SELECT "workspaceId", "dimension", "hour", "domain", "value", "clicks", "workspaceVisitors", "bots" FROM breakdown
       UNION ALL
       SELECT "workspaceId", 'link', "hour", "domain", "linkUniq"::text, "clicks", "linkVisitors", "bots" FROM c
     ),
     link_groups AS (
       SELECT l."uniq" AS "linkUniq", g."groupKind", g."groupValue"
       FROM "Link" l CROSS JOIN LATERAL ${linkGroupsSql('l')} AS g
       WHERE l."uniq" IN (SELECT "linkUniq" FROM c)
     ),
     -- The groups' rows: the workspace's, with the links' own visitors (what summing the links' rows counts).
     grouped AS (
       SELECT b."workspaceId", g."groupKind", g."groupValue", b."dimension", b."hour", b."domain", b."value", b."clicks", b."linkVisitors", b."bots"
       FROM breakdown b JOIN link_groups g ON g."linkUniq" = b."linkUniq"
       UNION ALL
       SELECT c."workspaceId", g."groupKind", g."groupValue", 'link', c."hour", c."domain", c."linkUniq"::text, c."clicks", c."linkVisitors", c."bots"
       FROM c JOIN link_groups g ON g."linkUniq" = c."linkUniq"
     ),
     ${tiers.join('\n     ')}
     click_rows AS (
       INSERT INTO "analytics"."LinkClicks" ("linkUniq", "clicks")
       SELECT "linkUniq", sum("clicks") FROM c GROUP BY 1 HAVING sum("clicks") > 0 ORDER BY 1
       ON CONFLICT ("linkUniq") DO UPDATE SET "clicks" = "LinkClicks"."clicks" + EXCLUDED."clicks"
     )
     SELECT coalesce(sum("clicks" + "bots"), 0)::int8 AS "visits" FROM c`
}
