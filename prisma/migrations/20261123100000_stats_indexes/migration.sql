-- Stats (issue 11). A link's raw visits are paged newest first, and a page's position must be unique: "at" is
-- not (a batch holds visits of the same millisecond), nor is any set of the other columns. "seq" numbers every
-- visit as it is inserted (a sequence, not ctid, which changes with VACUUM FULL or an update); the pages follow
-- ("at", "seq"), so visits that existed when paging began are seen once each.
CREATE SEQUENCE "analytics"."Visit_seq_seq" AS BIGINT;
ALTER TABLE "analytics"."Visit" ADD COLUMN "seq" BIGINT NOT NULL DEFAULT nextval('"analytics"."Visit_seq_seq"');
ALTER SEQUENCE "analytics"."Visit_seq_seq" OWNED BY "analytics"."Visit"."seq";

-- Replaces ("linkUniq", "at" DESC): the same reads, and a page's order straight from the index.
CREATE INDEX "Visit_linkUniq_at_seq_idx" ON "analytics"."Visit" ("linkUniq", "at" DESC, "seq" DESC);
DROP INDEX "analytics"."Visit_linkUniq_at_idx";
