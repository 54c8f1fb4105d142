/** Every database access of pixels as entities of their own (links create and reuse them in link-repository.ts). */
import type { PrismaClient } from '../db/database.js'
import { inTransaction } from '../db/transaction.js'
import type { Prisma } from '../generated/prisma/client.js'

export type StoredPixel = Prisma.PixelGetPayload<object>

export function listPixels(prisma: PrismaClient, workspaceId: number): Promise<StoredPixel[]> {
  return prisma.pixel.findMany({ where: { workspaceId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] })
}

export function findPixel(prisma: PrismaClient, workspaceId: number, id: string): Promise<StoredPixel | null> {
  return prisma.pixel.findFirst({ where: { id, workspaceId } })
}

/** The pixel that holds the key, once a delete of it under way has ended (src/db/unique-key.ts). */
export async function pixelHoldingKey(prisma: PrismaClient, workspaceId: number, platform: string, value: string) {
  const [holder] = await prisma.$queryRaw<{ id: string }[]>`
    SELECT "id"::text AS "id" FROM "Pixel"
    WHERE "workspaceId" = ${workspaceId} AND "platform" = ${platform} AND "value" = ${value} FOR KEY SHARE`
  return holder
}

/** Throws P2002 when the workspace has a pixel of that platform and value. */
export function insertPixel(
  prisma: PrismaClient,
  pixel: { workspaceId: number; platform: string; value: string; title: string | null },
): Promise<StoredPixel> {
  return prisma.pixel.create({ data: pixel })
}

/** The links that use the pixel show it in their records: their updatedDate moves too (never backwards). */
function touchLinksOfPixel(tx: Prisma.TransactionClient, workspaceId: number, id: string) {
  return tx.$executeRaw`
    UPDATE "Link" SET "updatedAt" = GREATEST("updatedAt", ${new Date().toISOString()}::timestamp(3))
    WHERE "workspaceId" = ${workspaceId} AND "uniq" IN (SELECT "linkUniq" FROM "LinkPixel" WHERE "pixelId" = ${id}::uuid)`
}

/**
 * Null when the pixel is gone; throws P2002 when the change collides with another pixel of the workspace. The
 * pixel is written before its links, the order of deletePixel.
 */
export async function updatePixel(
  prisma: PrismaClient,
  workspaceId: number,
  id: string,
  changes: { platform?: string; value?: string; title?: string | null },
): Promise<StoredPixel | null> {
  return inTransaction(prisma, async (tx) => {
    const { count } = await tx.pixel.updateMany({ where: { id, workspaceId }, data: changes })
    if (count === 0) return null
    await touchLinksOfPixel(tx, workspaceId, id)
    return tx.pixel.findFirst({ where: { id, workspaceId } })
  })
}

/**
 * Deletes the pixel; the links that used it lose it (their link–pixel rows cascade). False when it was gone.
 *
 * The pixel is locked first, then the links: the order in which a link's write locks them
 * (src/links/link-repository.ts), so the two never deadlock. A link being saved with this pixel either
 * finishes first (and loses the pixel here like any other) or waits and finds it gone (a 400).
 */
export async function deletePixel(prisma: PrismaClient, workspaceId: number, id: string): Promise<boolean> {
  return inTransaction(prisma, async (tx) => {
    const locked = await tx.$queryRaw<unknown[]>`
      SELECT 1 FROM "Pixel" WHERE "id" = ${id}::uuid AND "workspaceId" = ${workspaceId} FOR UPDATE`
    if (locked.length === 0) return false
    // The links' records change (one pixel fewer).
    await touchLinksOfPixel(tx, workspaceId, id)
    await tx.pixel.delete({ where: { id } })
    return true
  })
}
