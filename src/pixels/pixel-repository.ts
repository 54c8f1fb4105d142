/** Every database access of pixels as entities of their own (links create and reuse them in link-repository.ts). */
import type { PrismaClient } from '../db/database.js'
import type { Prisma } from '../generated/prisma/client.js'

export type StoredPixel = Prisma.PixelGetPayload<object>

export function listPixels(prisma: PrismaClient, workspaceId: number): Promise<StoredPixel[]> {
  return prisma.pixel.findMany({ where: { workspaceId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] })
}

export function findPixel(prisma: PrismaClient, workspaceId: number, id: string): Promise<StoredPixel | null> {
  return prisma.pixel.findFirst({ where: { id, workspaceId } })
}

export function findPixelByKey(prisma: PrismaClient, workspaceId: number, platform: string, value: string) {
  return prisma.pixel.findUnique({ where: { workspaceId_platform_value: { workspaceId, platform, value } } })
}

/** Throws P2002 when the workspace has a pixel of that platform and value. */
export function insertPixel(
  prisma: PrismaClient,
  pixel: { workspaceId: number; platform: string; value: string; title: string | null },
): Promise<StoredPixel> {
  return prisma.pixel.create({ data: pixel })
}

/** Null when the pixel is gone; throws P2002 when the change collides with another pixel of the workspace. */
export async function updatePixel(
  prisma: PrismaClient,
  workspaceId: number,
  id: string,
  changes: { platform?: string; value?: string; title?: string | null },
): Promise<StoredPixel | null> {
  const { count } = await prisma.pixel.updateMany({ where: { id, workspaceId }, data: changes })
  return count === 0 ? null : findPixel(prisma, workspaceId, id)
}

/** Deletes the pixel; the links that used it lose it (their link–pixel rows cascade). False when it was gone. */
export async function deletePixel(prisma: PrismaClient, workspaceId: number, id: string): Promise<boolean> {
  return prisma.$transaction(async (tx) => {
    // The links' records change (one pixel fewer), so their updatedDate does too.
    await tx.link.updateMany({ where: { workspaceId, pixels: { some: { pixelId: id } } }, data: { updatedAt: new Date() } })
    const { count } = await tx.pixel.deleteMany({ where: { id, workspaceId } })
    return count > 0
  })
}
