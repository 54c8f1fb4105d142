-- Daily aggregates (issue 11's workspace stats target): the same rows as LinkHourly and WorkspaceHourly, summed
-- over UTC days. A workspace of many rarely visited links has about as many hourly rows as visits; a range of
-- months reads its whole UTC days from here and only the partial days at its edges from the hourly tables
-- (src/analytics/stats-queries.ts). Written by the same statement as the hourly rows (visit-aggregates.ts), so
-- both tiers always hold the same visits; trimmed with them, at a whole UTC day (partitions.ts).
-- "day" is the day's start (midnight UTC) as a timestamptz, so that rows of both tiers read alike.
CREATE TABLE "analytics"."LinkDaily" (
  "linkUniq"   INTEGER     NOT NULL,
  "dimension"  TEXT        NOT NULL,
  "day"        TIMESTAMPTZ NOT NULL,
  "value"      TEXT        NOT NULL,
  "clicks"     INTEGER     NOT NULL DEFAULT 0,
  "visitors"   INTEGER     NOT NULL DEFAULT 0,
  "bots"       INTEGER     NOT NULL DEFAULT 0,
  PRIMARY KEY ("linkUniq", "dimension", "day", "value")
);

CREATE TABLE "analytics"."WorkspaceDaily" (
  "workspaceId" INTEGER     NOT NULL,
  "dimension"   TEXT        NOT NULL,
  "day"         TIMESTAMPTZ NOT NULL,
  "domain"      TEXT        NOT NULL,
  "value"       TEXT        NOT NULL,
  "clicks"      INTEGER     NOT NULL DEFAULT 0,
  "visitors"    INTEGER     NOT NULL DEFAULT 0,
  "bots"        INTEGER     NOT NULL DEFAULT 0,
  PRIMARY KEY ("workspaceId", "dimension", "day", "domain", "value")
);

-- The hourly rows already summed; visitors add up because both count first visits of a UTC day.
INSERT INTO "analytics"."LinkDaily" ("linkUniq", "dimension", "day", "value", "clicks", "visitors", "bots")
SELECT "linkUniq", "dimension", date_trunc('day', "hour", 'UTC'), "value", sum("clicks"), sum("visitors"), sum("bots")
FROM "analytics"."LinkHourly" GROUP BY 1, 2, 3, 4;

INSERT INTO "analytics"."WorkspaceDaily" ("workspaceId", "dimension", "day", "domain", "value", "clicks", "visitors", "bots")
SELECT "workspaceId", "dimension", date_trunc('day', "hour", 'UTC'), "domain", "value", sum("clicks"), sum("visitors"), sum("bots")
FROM "analytics"."WorkspaceHourly" GROUP BY 1, 2, 3, 4, 5;

-- The top links are summed for a few candidate links first (stats-queries.ts readTopLinks): their daily rows,
-- found by link. Without "clicks" in it, a rollup that only adds to a row can still update it in place (HOT).
CREATE INDEX "WorkspaceDaily_link_idx" ON "analytics"."WorkspaceDaily" ("workspaceId", "value", "day") WHERE "dimension" = 'link';
