-- Click analytics (issue 11). Kept in a schema of its own, outside Prisma's model: Prisma cannot describe a
-- partitioned table, and nothing here is read or written through its client. src/analytics/ maintains it:
-- monthly partitions of "Visit" created ahead of time, old ones dropped after VISIT_RETENTION_DAYS.
CREATE SCHEMA IF NOT EXISTS "analytics";

-- One row per visit that reached a destination, and per crawler preview (bot = true). No IP address: "visitor"
-- is a keyed hash of the address and user agent under a key that changes every UTC day.
CREATE TABLE "analytics"."Visit" (
  "at"            TIMESTAMPTZ NOT NULL,
  "linkUniq"      INTEGER     NOT NULL,
  "workspaceId"   INTEGER     NOT NULL,
  "domain"        TEXT        NOT NULL,
  -- ISO 3166-1 alpha-2, upper case; NULL when unknown.
  "country"       TEXT,
  -- The referrer's host; NULL for a direct visit.
  "referrerHost"  TEXT,
  -- desktop, mobile, tablet, tv, console, wearable, embedded or bot.
  "device"        TEXT        NOT NULL,
  "os"            TEXT,
  "browser"       TEXT,
  "destination"   TEXT        NOT NULL,
  -- How the destination was chosen: default, geolocation or rotator.
  "reason"        TEXT        NOT NULL,
  -- What the visitor was answered: redirect, masking, interstitial or crawler.
  "answer"        TEXT        NOT NULL,
  "bot"           BOOLEAN     NOT NULL,
  "visitor"       BIGINT      NOT NULL,
  -- The visitor's first visit of this link on this UTC day (what unique visitors count).
  "firstOfDay"    BOOLEAN     NOT NULL,
  -- Numbers every visit as it is inserted: a link's visits are paged newest first on ("at", "seq"), and "at" alone
  -- is not unique (a batch holds visits of the same millisecond); ctid would change with VACUUM FULL.
  "seq"           BIGSERIAL   NOT NULL
) PARTITION BY RANGE ("at");

CREATE INDEX "Visit_linkUniq_at_seq_idx" ON "analytics"."Visit" ("linkUniq", "at" DESC, "seq" DESC);

-- Hourly aggregates per link, one row per dimension value: what stats read, so that long ranges stay fast.
-- dimension: total (value ''), country, referrer, device, os, browser, destination; '' stands for unknown.
CREATE TABLE "analytics"."LinkHourly" (
  "linkUniq"   INTEGER     NOT NULL,
  "dimension"  TEXT        NOT NULL,
  "hour"       TIMESTAMPTZ NOT NULL,
  "value"      TEXT        NOT NULL,
  "clicks"     INTEGER     NOT NULL DEFAULT 0,
  "visitors"   INTEGER     NOT NULL DEFAULT 0,
  "bots"       INTEGER     NOT NULL DEFAULT 0,
  PRIMARY KEY ("linkUniq", "dimension", "hour", "value")
);

-- The same per workspace and domain, with one more dimension, link (value: the uniq), for the top links.
-- visitors here are first visits of the workspace (any of its links) on the UTC day.
CREATE TABLE "analytics"."WorkspaceHourly" (
  "workspaceId" INTEGER     NOT NULL,
  "dimension"   TEXT        NOT NULL,
  "hour"        TIMESTAMPTZ NOT NULL,
  "domain"      TEXT        NOT NULL,
  "value"       TEXT        NOT NULL,
  "clicks"      INTEGER     NOT NULL DEFAULT 0,
  "visitors"    INTEGER     NOT NULL DEFAULT 0,
  "bots"        INTEGER     NOT NULL DEFAULT 0,
  PRIMARY KEY ("workspaceId", "dimension", "hour", "domain", "value")
);

-- Who was already seen today, to tell first visits of the day; rows older than yesterday are deleted.
CREATE TABLE "analytics"."SeenToday" (
  "day"     DATE    NOT NULL,
  -- A link's uniq, or minus a workspace's id.
  "scope"   INTEGER NOT NULL,
  "visitor" BIGINT  NOT NULL,
  PRIMARY KEY ("day", "scope", "visitor")
);

-- All-time clicks of each link (bots excluded), read with the link record.
CREATE TABLE "analytics"."LinkClicks" (
  "linkUniq" INTEGER PRIMARY KEY,
  "clicks"   BIGINT  NOT NULL
);
