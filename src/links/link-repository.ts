/** Every database access of the links module: reads, the list, the create and update transactions, delete. */
import { Prisma } from '../generated/prisma/client.js'
import type { PrismaClient } from '../db/database.js'
import { KeyedQueue } from '../db/keyed-queue.js'
import { inTransaction, TRANSACTION_OPTIONS, type Transaction } from '../db/transaction.js'
import { fieldError } from '../errors/app-error.js'
import type { LinkSettings, PixelSpec } from './link-input.js'
import { slugKey } from './slug.js'

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

/**
 * Ids of the pixels, finding or creating the ones given by platform and value; order and first-seen kept.
 *
 * Every pixel the link will use is locked FOR KEY SHARE, as the link–pixel foreign key would lock it, but
 * before the link's own row: a pixel being deleted meanwhile is then either gone here (a 400 naming it) or
 * deleted only once this link is stored, with the link's updatedDate moved as for any link that loses a
 * pixel (src/pixels/pixel-repository.ts locks the same rows in the same order: pixel, then links).
 */
async function resolvePixels(tx: Transaction, workspaceId: number, specs: PixelSpec[]): Promise<string[]> {
  if (specs.length === 0) return []
  const wanted = specs.filter((spec): spec is Exclude<PixelSpec, { id: string }> => !('id' in spec))
  if (wanted.length > 0) {
    // ON CONFLICT DO NOTHING: a concurrent link creating the same pixel is not an error. Inserted in one
    // order for every transaction (by platform, then value), so that two creating the same new pixels wait
    // for each other instead of deadlocking.
    const inOrder = wanted.slice().sort((a, b) => compare(a.platform, b.platform) || compare(a.value, b.value))
    await tx.pixel.createMany({
      data: inOrder.map((spec) => ({ workspaceId, platform: spec.platform, value: spec.value, title: spec.title })),
      skipDuplicates: true,
    })
  }
  const ids = specs.flatMap((spec) => ('id' in spec ? [spec.id] : []))
  const rows = await tx.$queryRaw<{ id: string; platform: string; value: string }[]>`
    SELECT "id", "platform", "value" FROM "Pixel"
    WHERE "workspaceId" = ${workspaceId}
      AND ("id" = ANY(${ids}::uuid[])
        OR ("platform", "value") IN (SELECT * FROM unnest(${wanted.map((spec) => spec.platform)}::text[], ${wanted.map((spec) => spec.value)}::text[])))
    ORDER BY "id"
    FOR KEY SHARE`
  const byId = new Set(rows.map((row) => row.id))
  const byKey = new Map(rows.map((row) => [`${row.platform}\u0000${row.value}`, row.id]))
  const resolved = specs.map((spec, index) => {
    if ('id' in spec) {
      if (!byId.has(spec.id)) throw fieldError(`/link/pixels/${index}`, 'is not a pixel of this workspace (it was deleted meanwhile)')
      return spec.id
    }
    const id = byKey.get(`${spec.platform}\u0000${spec.value}`)
    // Found by the insert above, deleted by another request before this one could lock it: rare, and harmless to repeat.
    if (!id) throw fieldError(`/link/pixels/${index}`, 'was deleted by another request while this link was being saved; send it again')
    return id
  })
  return [...new Set(resolved)]
}

/** Code-unit order: the same in every instance, whatever its locale. */
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * Locks the scripts the link will name, for the same reason and in the same order as its pixels: a script
 * deleted meanwhile is either gone here (400) or taken out of this link by the delete, which waits
 * (src/scripts/script-repository.ts).
 */
async function lockScripts(tx: Transaction, workspaceId: number, scriptIds: number[] | null | undefined): Promise<void> {
  if (!scriptIds?.length) return
  const rows = await tx.$queryRaw<{ id: number }[]>`
    SELECT "id" FROM "Script" WHERE "workspaceId" = ${workspaceId} AND "id" = ANY(${scriptIds}::int[]) ORDER BY "id" FOR KEY SHARE`
  const found = new Set(rows.map((row) => row.id))
  const missing = scriptIds.findIndex((id) => !found.has(id))
  if (missing >= 0) throw fieldError(`/link/linkScripts/${missing}`, 'is not a script of this workspace (it was deleted meanwhile)')
}

/**
 * Stores a new link. Throws P2002 when the slug is taken, P2003 (Link_folderId_fkey) when its folder was
 * deleted since it was checked.
 */
export async function insertLink(
  prisma: PrismaClient,
  link: { workspaceId: number; domain: string; slug: string; settings: LinkSettings },
): Promise<StoredLink> {
  return inTransaction(prisma, async (tx) => {
    const pixelIds = await resolvePixels(tx, link.workspaceId, link.settings.pixels)
    await lockScripts(tx, link.workspaceId, link.settings.linkScripts)
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

/**
 * Applies `changes` to the stored link; null when the link was deleted meanwhile. Throws P2003
 * (Link_folderId_fkey) when the new folder was deleted since it was checked.
 *
 * Concurrent updates of one link run one after the other: the link's row is locked before anything of it
 * changes, so a writer replaces the pixel list another wrote whole (never a merge of the two), and takes
 * its updatedDate only once it holds the lock: the stored updatedDate follows commit order.
 */
export async function updateLink(
  prisma: PrismaClient,
  link: StoredLink,
  changes: Partial<LinkSettings>,
): Promise<StoredLink | null> {
  return linkWriters(prisma).run(link.uniq, TRANSACTION_OPTIONS.timeout, () => inTransaction(prisma, async (tx) => {
    const pixelIds = changes.pixels === undefined ? undefined : await resolvePixels(tx, link.workspaceId, changes.pixels)
    await lockScripts(tx, link.workspaceId, changes.linkScripts)
    // FOR NO KEY UPDATE: the lock the UPDATE below would take anyway, taken first.
    const [locked] = await tx.$queryRaw<{ updatedAt: Date }[]>`
      SELECT "updatedAt" FROM "Link" WHERE "uniq" = ${link.uniq} FOR NO KEY UPDATE`
    if (!locked) return null
    if (pixelIds !== undefined) {
      await tx.linkPixel.deleteMany({ where: { linkUniq: link.uniq } })
      await tx.linkPixel.createMany({ data: pixelIds.map((pixelId, position) => ({ linkUniq: link.uniq, pixelId, position })) })
    }
    return tx.link.update({
      where: { uniq: link.uniq },
      data: { ...(columns(changes) as Prisma.LinkUncheckedUpdateInput), updatedAt: notBefore(locked.updatedAt) },
      include: withPixels,
    })
  }))
}

/**
 * The writers of each link, one at a time per instance (see keyed-queue.ts), per database: tests run several
 * apps, each on its own, in one process. A writer waits for its turn at most as long as it could wait for the
 * row lock inside a transaction (its timeout), then it is a 503.
 */
const writersByDatabase = new WeakMap<PrismaClient, KeyedQueue<number>>()
function linkWriters(prisma: PrismaClient): KeyedQueue<number> {
  let writers = writersByDatabase.get(prisma)
  if (!writers) writersByDatabase.set(prisma, (writers = new KeyedQueue()))
  return writers
}

/**
 * Now, or `stored` should this instance's clock be behind the one that wrote it: a link's updatedDate never
 * goes back, whichever instance of the service writes it.
 */
export function notBefore(stored: Date): Date {
  const now = new Date()
  return now > stored ? now : stored
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
