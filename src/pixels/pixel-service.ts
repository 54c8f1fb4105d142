/** Pixel rules around the repository: one pixel per platform and value in a workspace. */
import type { PixelBody, CreatePixelRequest, UpdatePixelRequest } from '../../schemas/pixel.js'
import type { Platform } from '../../schemas/link.js'
import type { PrismaClient } from '../db/database.js'
import { writeUniqueKey } from '../db/unique-key.js'
import { notFound } from '../errors/app-error.js'
import { pixelExists } from '../errors/conflicts.js'
import type { Caller } from '../plugins/auth.js'
import * as pixels from './pixel-repository.js'

export function toPixelRecord(pixel: pixels.StoredPixel): PixelBody {
  return {
    id: pixel.id,
    platform: pixel.platform as Platform,
    value: pixel.value,
    title: pixel.title,
    workspaceId: pixel.workspaceId,
    createdAt: pixel.createdAt.toISOString(),
  }
}

/** The path's UUID as stored: lower case, without the urn:uuid: prefix the uuid format allows. */
export function pixelId(uuid: string): string {
  return uuid.toLowerCase().replace(/^urn:uuid:/, '')
}

/**
 * A write of (workspace, platform, value) that may collide with another pixel of the workspace: the 409 that
 * names that pixel, or the write again once a pixel being deleted has freed the key (src/db/unique-key.ts).
 */
function withUniqueKey<T>(
  prisma: PrismaClient,
  key: { workspaceId: number; platform: string; value: string },
  write: () => Promise<T>,
): Promise<T> {
  return writeUniqueKey(
    write,
    () => pixels.pixelHoldingKey(prisma, key.workspaceId, key.platform, key.value),
    (holder) => pixelExists(key.platform, key.value, holder.id),
  )
}

export async function createPixel(prisma: PrismaClient, caller: Caller, body: CreatePixelRequest) {
  const pixel = { workspaceId: caller.workspaceId, platform: body.platform, value: body.value, title: body.title ?? null }
  return withUniqueKey(prisma, pixel, () => pixels.insertPixel(prisma, pixel))
}

export async function updatePixel(prisma: PrismaClient, caller: Caller, uuid: string, body: UpdatePixelRequest) {
  const id = pixelId(uuid)
  const pixel = await pixels.findPixel(prisma, caller.workspaceId, id)
  if (!pixel) throw notFound('pixel')
  const changes = { platform: body.platform, value: body.value, title: body.title }
  // Nothing to change: the links that use it keep their updatedDate.
  if ((Object.keys(changes) as (keyof typeof changes)[]).every((field) => changes[field] === undefined || changes[field] === pixel[field])) {
    return pixel
  }
  const key = { workspaceId: caller.workspaceId, platform: body.platform ?? pixel.platform, value: body.value ?? pixel.value }
  const updated = await withUniqueKey(prisma, key, () => pixels.updatePixel(prisma, caller.workspaceId, id, changes))
  if (!updated) throw notFound('pixel')
  return updated
}

export async function deletePixel(prisma: PrismaClient, caller: Caller, uuid: string) {
  if (!(await pixels.deletePixel(prisma, caller.workspaceId, pixelId(uuid)))) throw notFound('pixel')
}
