-- Aggregates per tag and per folder (issue 11's workspace stats with `tag` or `folderId`): summing the matching
-- links' own rows read about one row per link, day and breakdown value (440,000 for a tag on 10% of 100,000
-- links over 30 days). These hold the same sums per group, keyed like WorkspaceHourly and WorkspaceDaily with the
-- group in front: groupKind 'tag' (groupValue: the tag in lower case, as "Link"."tagKeys" holds it) or 'folder'
-- (groupValue: the folder's id as text).
--
-- A filter means "the visits of the links that have this tag / are in this folder now", so a group holds the
-- history of its current links: the rollup adds visits to the groups of their link as it is then, and a change of
-- a link's tags or folder, or its deletion, moves the link's history from the old groups to the new ones
-- (src/analytics/group-history.ts). "visitors" are the links' own unique visitors summed (a visitor of two links
-- of a tag on one day counts twice), as the per-link sums they replace count them.
CREATE TABLE "analytics"."GroupHourly" (
  "workspaceId" INTEGER     NOT NULL,
  "groupKind"   TEXT        NOT NULL,
  "groupValue"  TEXT        NOT NULL,
  "dimension"   TEXT        NOT NULL,
  "hour"        TIMESTAMPTZ NOT NULL,
  "domain"      TEXT        NOT NULL,
  "value"       TEXT        NOT NULL,
  "clicks"      INTEGER     NOT NULL DEFAULT 0,
  "visitors"    INTEGER     NOT NULL DEFAULT 0,
  "bots"        INTEGER     NOT NULL DEFAULT 0,
  PRIMARY KEY ("workspaceId", "groupKind", "groupValue", "dimension", "hour", "domain", "value")
);

CREATE TABLE "analytics"."GroupDaily" (
  "workspaceId" INTEGER     NOT NULL,
  "groupKind"   TEXT        NOT NULL,
  "groupValue"  TEXT        NOT NULL,
  "dimension"   TEXT        NOT NULL,
  "day"         TIMESTAMPTZ NOT NULL,
  "domain"      TEXT        NOT NULL,
  "value"       TEXT        NOT NULL,
  "clicks"      INTEGER     NOT NULL DEFAULT 0,
  "visitors"    INTEGER     NOT NULL DEFAULT 0,
  "bots"        INTEGER     NOT NULL DEFAULT 0,
  PRIMARY KEY ("workspaceId", "groupKind", "groupValue", "dimension", "day", "domain", "value")
);

-- The top links' candidates are read by link, as from WorkspaceDaily (WorkspaceDaily_link_idx).
CREATE INDEX "GroupDaily_link_idx" ON "analytics"."GroupDaily" ("workspaceId", "groupKind", "groupValue", "value", "day") WHERE "dimension" = 'link';

-- Backfill: the links' aggregates so far, in the groups of the links as they are now. The rollup's row is taken
-- first, so that a rollup under way finishes before these are read and none starts until they are written.
-- A link's visits are all on its own domain (a link's domain never changes), so the link's domain is theirs.
SELECT 1 FROM "analytics"."Rollup" FOR UPDATE;

INSERT INTO "analytics"."GroupHourly" ("workspaceId", "groupKind", "groupValue", "dimension", "hour", "domain", "value", "clicks", "visitors", "bots")
WITH "link_groups" AS (
  SELECT l."uniq" AS "linkUniq", l."workspaceId", l."domain", g."groupKind", g."groupValue"
  FROM "Link" l CROSS JOIN LATERAL (
    SELECT DISTINCT 'tag' AS "groupKind", t AS "groupValue" FROM unnest(l."tagKeys") AS t
    UNION ALL
    SELECT 'folder', l."folderId"::text WHERE l."folderId" IS NOT NULL
  ) g
)
SELECT g."workspaceId", g."groupKind", g."groupValue", r."dimension", r."hour", g."domain", r."value", sum(r."clicks"), sum(r."visitors"), sum(r."bots")
FROM "link_groups" g JOIN (
  SELECT "linkUniq", "dimension", "hour", "value", "clicks", "visitors", "bots" FROM "analytics"."LinkHourly"
  UNION ALL
  SELECT "linkUniq", 'link', "hour", "linkUniq"::text, "clicks", "visitors", "bots" FROM "analytics"."LinkHourly" WHERE "dimension" = 'total'
) r ON r."linkUniq" = g."linkUniq"
GROUP BY 1, 2, 3, 4, 5, 6, 7;

INSERT INTO "analytics"."GroupDaily" ("workspaceId", "groupKind", "groupValue", "dimension", "day", "domain", "value", "clicks", "visitors", "bots")
WITH "link_groups" AS (
  SELECT l."uniq" AS "linkUniq", l."workspaceId", l."domain", g."groupKind", g."groupValue"
  FROM "Link" l CROSS JOIN LATERAL (
    SELECT DISTINCT 'tag' AS "groupKind", t AS "groupValue" FROM unnest(l."tagKeys") AS t
    UNION ALL
    SELECT 'folder', l."folderId"::text WHERE l."folderId" IS NOT NULL
  ) g
)
SELECT g."workspaceId", g."groupKind", g."groupValue", r."dimension", r."day", g."domain", r."value", sum(r."clicks"), sum(r."visitors"), sum(r."bots")
FROM "link_groups" g JOIN (
  SELECT "linkUniq", "dimension", "day", "value", "clicks", "visitors", "bots" FROM "analytics"."LinkDaily"
  UNION ALL
  SELECT "linkUniq", 'link', "day", "linkUniq"::text, "clicks", "visitors", "bots" FROM "analytics"."LinkDaily" WHERE "dimension" = 'total'
) r ON r."linkUniq" = g."linkUniq"
GROUP BY 1, 2, 3, 4, 5, 6, 7;
