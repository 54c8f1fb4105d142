/**
 * The one statement that adds visits to the hourly aggregates (LinkHourly, WorkspaceHourly) and to the links'
 * all-time clicks (LinkClicks); it answers one row, the number of visits it added. Its visits come from `source`, any SELECT giving analytics."Visit"'s columns: a
 * minute of raw rows for the rollup (visit-rollup.ts), or a batch's late visits (visit-store.ts).
 *
 * PostgreSQL sums the visits by their combination of facts, spreads each combination over the breakdowns and sums
 * again: cheaper there than building those rows in JavaScript and sending them. Rows are written in key order,
 * so two writers at once take their row locks in the same order and wait for each other instead of deadlocking.
 * Hours are cut in UTC (a zone with a half-hour offset would cut them elsewhere).
 */

/**
 * Aggregate values are part of their table's key, and an index entry must stay well under PostgreSQL's 2,700
 * bytes: longer destinations are cut (two destinations equal over their first 1,024 characters count as one).
 */
export const MAX_AGGREGATE_VALUE = 1024

export function aggregateVisitsSql(source: string): string {
  return `WITH c AS (
       SELECT v."linkUniq", v."workspaceId", v."domain", date_trunc('hour', v."at", 'UTC') AS "hour",
         coalesce(v."country", '') AS "country", coalesce(v."referrerHost", '') AS "referrer", v."device",
         coalesce(v."os", '') AS "os", coalesce(v."browser", '') AS "browser", left(v."destination", ${MAX_AGGREGATE_VALUE}) AS "destination",
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
     link_rows AS (
       INSERT INTO "analytics"."LinkHourly" ("linkUniq", "dimension", "hour", "value", "clicks", "visitors", "bots")
       SELECT "linkUniq", "dimension", "hour", "value", sum("clicks"), sum("linkVisitors"), sum("bots")
       FROM breakdown GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
       ON CONFLICT ("linkUniq", "dimension", "hour", "value") DO UPDATE SET
         "clicks" = "LinkHourly"."clicks" + EXCLUDED."clicks",
         "visitors" = "LinkHourly"."visitors" + EXCLUDED."visitors",
         "bots" = "LinkHourly"."bots" + EXCLUDED."bots"
     ),
     workspace_rows AS (
       INSERT INTO "analytics"."WorkspaceHourly" ("workspaceId", "dimension", "hour", "domain", "value", "clicks", "visitors", "bots")
       SELECT "workspaceId", "dimension", "hour", "domain", "value", sum("clicks"), sum("workspaceVisitors"), sum("bots")
       FROM (
         SELECT "workspaceId", "dimension", "hour", "domain", "value", "clicks", "workspaceVisitors", "bots" FROM breakdown
         UNION ALL
         SELECT "workspaceId", 'link', "hour", "domain", "linkUniq"::text, "clicks", "workspaceVisitors", "bots" FROM c
       ) AS w
       GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
       ON CONFLICT ("workspaceId", "dimension", "hour", "domain", "value") DO UPDATE SET
         "clicks" = "WorkspaceHourly"."clicks" + EXCLUDED."clicks",
         "visitors" = "WorkspaceHourly"."visitors" + EXCLUDED."visitors",
         "bots" = "WorkspaceHourly"."bots" + EXCLUDED."bots"
     ),
     click_rows AS (
       INSERT INTO "analytics"."LinkClicks" ("linkUniq", "clicks")
       SELECT "linkUniq", sum("clicks") FROM c GROUP BY 1 HAVING sum("clicks") > 0 ORDER BY 1
       ON CONFLICT ("linkUniq") DO UPDATE SET "clicks" = "LinkClicks"."clicks" + EXCLUDED."clicks"
     )
     SELECT coalesce(sum("clicks" + "bots"), 0)::int8 AS "visits" FROM c`
}
