-- Idempotency-Key (issue 14): the answers of creates and bulk creates sent with a key, per workspace, kept for 24 h
-- when REDIS_URL is unset (src/idempotency/postgres-store.ts). A row whose expiresAt has passed is free: the next
-- request with its key takes it over, and a sweep deletes such rows now and then (by the expiresAt index).
-- CreateTable
CREATE TABLE "IdempotencyKey" (
    "workspaceId" INTEGER NOT NULL,
    "key" TEXT NOT NULL,
    "fingerprint" TEXT NOT NULL,
    "claimToken" TEXT,
    "status" INTEGER,
    "headers" JSONB,
    "body" TEXT,
    "expiresAt" TIMESTAMPTZ(3) NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "IdempotencyKey_pkey" PRIMARY KEY ("workspaceId","key")
);

-- CreateIndex
CREATE INDEX "IdempotencyKey_expiresAt_idx" ON "IdempotencyKey"("expiresAt");

-- AddForeignKey
ALTER TABLE "IdempotencyKey" ADD CONSTRAINT "IdempotencyKey_workspaceId_fkey" FOREIGN KEY ("workspaceId") REFERENCES "Workspace"("id") ON DELETE CASCADE ON UPDATE CASCADE;
