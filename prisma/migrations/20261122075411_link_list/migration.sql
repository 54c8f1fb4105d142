-- AlterTable
ALTER TABLE "Link" ADD COLUMN     "tagKeys" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- Backfill (written by hand): the lower-case tags of the links stored so far, before the index is built.
-- lower() follows the database's collation; for ASCII tags it equals the service's toLowerCase(), and every
-- link written from now on gets the service's own form.
UPDATE "Link" SET "tagKeys" = ARRAY(SELECT lower(tag) FROM unnest("tags") AS tag) WHERE cardinality("tags") > 0;

-- CreateIndex
CREATE INDEX "Link_folderId_uniq_idx" ON "Link"("folderId", "uniq" DESC);

-- CreateIndex
CREATE INDEX "Link_tagKeys_idx" ON "Link" USING GIN ("tagKeys");
