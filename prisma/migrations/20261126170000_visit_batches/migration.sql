-- The batches of visits stored, by the id the recorder gives each batch (src/analytics/visit-recorder.ts). A batch
-- whose COMMIT went through but whose answer was lost (a connection cut at that moment) is sent again with the
-- same id: its row here tells the second attempt that the visits are stored already, so none is stored twice.
-- Rows older than a day are deleted with the other expired rows (src/analytics/partitions.ts): a batch is tried
-- again within seconds, never a day later.
CREATE TABLE "analytics"."VisitBatch" (
  "id"       UUID        NOT NULL PRIMARY KEY,
  "storedAt" TIMESTAMPTZ NOT NULL DEFAULT now()
);
