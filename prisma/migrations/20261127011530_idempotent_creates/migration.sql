-- CreateTable
CREATE TABLE "IdempotentCreate" (
    "workspaceId" INTEGER NOT NULL,
    "key" TEXT NOT NULL,
    "fingerprint" TEXT NOT NULL,
    "linkUniq" INTEGER NOT NULL,
    "autofill" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "IdempotentCreate_pkey" PRIMARY KEY ("workspaceId","key")
);

-- CreateIndex
CREATE INDEX "IdempotentCreate_createdAt_idx" ON "IdempotentCreate"("createdAt");

-- CreateIndex
CREATE INDEX "IdempotentCreate_linkUniq_idx" ON "IdempotentCreate"("linkUniq");

-- AddForeignKey
ALTER TABLE "IdempotentCreate" ADD CONSTRAINT "IdempotentCreate_linkUniq_fkey" FOREIGN KEY ("linkUniq") REFERENCES "Link"("uniq") ON DELETE CASCADE ON UPDATE CASCADE;
