/** Pixel rules around the repository: one pixel per platform and value in a workspace. */
import type { PixelBody, CreatePixelRequest, UpdatePixelRequest } from '../../schemas/pixel.js'
import type { Platform } from '../../schemas/link.js'
import type { PrismaClient } from '../db/database.js'
import { isUniqueViolation } from '../db/errors.js'
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

/** A unique violation on (workspace, platform, value) as the 409 that names the pixel already there. */
async function conflict(prisma: PrismaClient, workspaceId: number, platform: string, value: string, error: unknown) {
  if (!isUniqueViolation(error)) return error
  const existing = await pixels.findPixelByKey(prisma, workspaceId, platform, value)
  return existing ? pixelExists(platform, value, existing.id) : error
}

export async function createPixel(prisma: PrismaClient, caller: Caller, body: CreatePixelRequest) {
  const pixel = { workspaceId: caller.workspaceId, platform: body.platform, value: body.value, title: body.title ?? null }
  try {
    return await pixels.insertPixel(prisma, pixel)
  } catch (error) {
    throw await conflict(prisma, caller.workspaceId, pixel.platform, pixel.value, error)
  }
}

export async function updatePixel(prisma: PrismaClient, caller: Caller, uuid: string, body: UpdatePixelRequest) {
  const id = pixelId(uuid)
  const pixel = await pixels.findPixel(prisma, caller.workspaceId, id)
  if (!pixel) throw notFound('pixel')
  const changes = { platform: body.platform, value: body.value, title: body.title }
  if (Object.values(changes).every((value) => value === undefined)) return pixel
  try {
    const updated = await pixels.updatePixel(prisma, caller.workspaceId, id, changes)
    if (!updated) throw notFound('pixel')
    return updated
  } catch (error) {
    throw await conflict(prisma, caller.workspaceId, body.platform ?? pixel.platform, body.value ?? pixel.value, error)
  }
}

export async function deletePixel(prisma: PrismaClient, caller: Caller, uuid: string) {
  if (!(await pixels.deletePixel(prisma, caller.workspaceId, pixelId(uuid)))) throw notFound('pixel')
}
