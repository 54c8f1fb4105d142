/** Every database access of the links module: reads, the list, the create and update transactions, delete. */
import { Prisma } from '../generated/prisma/client.js'
import type { PrismaClient } from '../db/database.js'
import type { LinkSettings, PixelSpec } from './link-input.js'
import { slugKey } from './slug.js'

type Transaction = Prisma.TransactionClient

const withPixels = {
  pixels: { orderBy: { position: 'asc' }, include: { pixel: true } },
} as const satisfies Prisma.LinkInclude

export type StoredLink = Prisma.LinkGetPayload<{ include: typeof withPixels }>

export function findLinkByUniq(prisma: PrismaClient, workspaceId: number, uniq: number): Promise<StoredLink | null> {
  return prisma.link.findFirst({ where: { uniq, workspaceId }, include: withPixels })
}

export function findLinkBySlug(
  prisma: PrismaClient,
  workspaceId: number,
  domain: string,
  slug: string,
): Promise<StoredLink | null> {
  return prisma.link.findFirst({ where: { domain, slugKey: slugKey(slug), workspaceId }, include: withPixels })
}

/** Column values for the settings present in `settings` (pixels are stored separately). */
function columns(settings: Partial<LinkSettings>): Prisma.LinkUncheckedUpdateInput {
  const data: Prisma.LinkUncheckedUpdateInput = {}
  const copy = ['url', 'title', 'description', 'image', 'favicon', 'folderId', 'showGDPR', 'tags', 'note',
    'deepLinkingEnable', 'linkScriptEnable', 'masking'] as const
  for (const field of copy) if (settings[field] !== undefined) (data as Record<string, unknown>)[field] = settings[field]
  // The list's tag filter ignores case through this lower-case copy (GIN-indexed); tags keep the client's spelling.
  if (settings.tags !== undefined) data.tagKeys = settings.tags.map((tag) => tag.toLowerCase())
  if (settings.geolocations !== undefined) data.geolocations = settings.geolocations
  if (settings.rotator !== undefined) data.linkRotator = settings.rotator
  // JSON null needs Prisma's marker; a plain null would be rejected for a Json column.
  if (settings.linkScripts !== undefined) data.linkScripts = settings.linkScripts ?? Prisma.DbNull
  if (settings.expiration !== undefined) {
    const expiration = settings.expiration
    data.expirationEnable = expiration?.enable ?? null
    data.expiresAt = expiration?.end ?? null
    data.expirationUrl = expiration?.url ?? null
    data.expirationTimezone = expiration?.timezone ?? null
  }
  if (settings.password !== undefined) {
    data.passwordEnable = settings.password?.enable ?? null
    data.passwordHash = settings.password?.hash ?? null
  }
  return data
}

/** Ids of the pixels, finding or creating the ones given by platform and value; order and first-seen kept. */
async function resolvePixels(tx: Transaction, workspaceId: number, specs: PixelSpec[]): Promise<string[]> {
  const wanted = specs.filter((spec): spec is Exclude<PixelSpec, { id: string }> => !('id' in spec))
  const byKey = new Map<string, string>()
  if (wanted.length > 0) {
    // ON CONFLICT DO NOTHING: a concurrent link creating the same pixel is not an error.
    await tx.pixel.createMany({
      data: wanted.map((spec) => ({ workspaceId, platform: spec.platform, value: spec.value, title: spec.title })),
      skipDuplicates: true,
    })
    const rows = await tx.pixel.findMany({
      where: { workspaceId, OR: wanted.map((spec) => ({ platform: spec.platform, value: spec.value })) },
      select: { id: true, platform: true, value: true },
    })
    for (const row of rows) byKey.set(`${row.platform}\u0000${row.value}`, row.id)
  }
  const ids = specs.map((spec) => ('id' in spec ? spec.id : byKey.get(`${spec.platform}\u0000${spec.value}`)!))
  return [...new Set(ids)]
}

export async function insertLink(
  prisma: PrismaClient,
  link: { workspaceId: number; domain: string; slug: string; settings: LinkSettings },
): Promise<StoredLink> {
  return prisma.$transaction(async (tx) => {
    const pixelIds = await resolvePixels(tx, link.workspaceId, link.settings.pixels)
    return tx.link.create({
      data: {
        ...(columns(link.settings) as Prisma.LinkUncheckedCreateInput),
        url: link.settings.url,
        workspaceId: link.workspaceId,
        domain: link.domain,
        slug: link.slug,
        slugKey: slugKey(link.slug),
        pixels: { create: pixelIds.map((pixelId, position) => ({ pixelId, position })) },
      },
      include: withPixels,
    })
  })
}

export async function updateLink(
  prisma: PrismaClient,
  link: StoredLink,
  changes: Partial<LinkSettings>,
): Promise<StoredLink | null> {
  return prisma.$transaction(async (tx) => {
    if (changes.pixels !== undefined) {
      const pixelIds = await resolvePixels(tx, link.workspaceId, changes.pixels)
      await tx.linkPixel.deleteMany({ where: { linkUniq: link.uniq } })
      await tx.linkPixel.createMany({ data: pixelIds.map((pixelId, position) => ({ linkUniq: link.uniq, pixelId, position })) })
    }
    // updateMany so that a link deleted meanwhile is reported as missing rather than failing the transaction.
    const { count } = await tx.link.updateMany({
      where: { uniq: link.uniq },
      data: { ...(columns(changes) as Prisma.LinkUncheckedUpdateManyInput), updatedAt: new Date() },
    })
    if (count === 0) return null
    return tx.link.findUniqueOrThrow({ where: { uniq: link.uniq }, include: withPixels })
  })
}

/** What the list can be narrowed by; every field but workspaceId is optional. */
export interface LinkFilter {
  workspaceId: number
  /** Only links older than this uniq: the position of the page (keyset pagination). */
  beforeUniq?: number
  domain?: string
  folderId?: number
  /** Lower-case tags that must all be present. */
  tagKeys?: string[]
  /** Case-insensitive substring of the slug, url, title or note. */
  search?: string
  createdFrom?: Date
  createdBefore?: Date
}

/** A LIKE pattern matches `%` and `_` as wildcards; a search for them must find them literally. */
function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (character) => `\\${character}`)
}

/** Up to `take` links of the filter, newest first: uniq DESC, an order the primary key and (workspaceId, uniq DESC) give unsorted. */
export function findLinksPage(prisma: PrismaClient, filter: LinkFilter, take: number): Promise<StoredLink[]> {
  const where: Prisma.LinkWhereInput = { workspaceId: filter.workspaceId }
  if (filter.beforeUniq !== undefined) where.uniq = { lt: filter.beforeUniq }
  if (filter.domain !== undefined) where.domain = filter.domain
  if (filter.folderId !== undefined) where.folderId = filter.folderId
  if (filter.tagKeys?.length) where.tagKeys = { hasEvery: filter.tagKeys }
  if (filter.createdFrom || filter.createdBefore) where.createdAt = { gte: filter.createdFrom, lt: filter.createdBefore }
  if (filter.search) {
    const contains = { contains: likeLiteral(filter.search), mode: 'insensitive' } as const
    where.OR = [{ slug: contains }, { url: contains }, { title: contains }, { note: contains }]
  }
  return prisma.link.findMany({ where, orderBy: { uniq: 'desc' }, take, include: withPixels })
}

/** Deletes the link (its link–pixel rows cascade); false when it was already gone. */
export async function deleteLinkByUniq(prisma: PrismaClient, workspaceId: number, uniq: number): Promise<boolean> {
  const { count } = await prisma.link.deleteMany({ where: { uniq, workspaceId } })
  return count > 0
}
