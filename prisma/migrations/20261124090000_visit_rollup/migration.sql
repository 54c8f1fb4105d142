-- Hourly aggregates rolled up from the raw visits (issue 11's recording cost): a batch of visits now writes its
-- raw rows only, and PostgreSQL sums a minute of them at a time into the aggregates (src/analytics/visit-rollup.ts).
-- Stats read the aggregates up to "rolledUpTo" and the raw visits from there on, in one statement.

-- The visitor's first visit of any link of the workspace on this UTC day (the workspace's unique visitors), as
-- "firstOfDay" is for the link. Visits stored before this migration were already counted in the aggregates.
ALTER TABLE "analytics"."Visit" ADD COLUMN "firstOfWorkspaceDay" BOOLEAN NOT NULL DEFAULT false;

-- The rollup and the stats read the raw visits by time: the last minute's of a month's partition. Visits arrive
-- in time order, so a btree on "at" is written at its right edge (cheap); a BRIN index would be smaller, but its
-- newest ranges stay unsummarised until a vacuum (and the embedded database has no autovacuum), so the very
-- pages wanted would be read with every older unsummarised one.
CREATE INDEX "Visit_at_idx" ON "analytics"."Visit" ("at");

-- One row: every visit before "rolledUpTo" is in the aggregates, every visit from it on is not (yet). Visits that
-- reach the database after their time was rolled up are added to the aggregates by their batch.
CREATE TABLE "analytics"."Rollup" (
  "id"          BOOLEAN     PRIMARY KEY DEFAULT true CHECK ("id"),
  "rolledUpTo"  TIMESTAMPTZ NOT NULL
);
INSERT INTO "analytics"."Rollup" ("id", "rolledUpTo") VALUES (true, now());

-- Each connection takes a thousand "seq" numbers at a time instead of one per visit ("seq" only has to be unique
-- and to grow with the time a visit was stored; gaps and interleaving between connections are harmless).
ALTER SEQUENCE "analytics"."Visit_seq_seq" CACHE 1000;
