import type { LinkRecordBody } from '../../schemas/link.js'
import { clicksOf } from '../analytics/stats-clicks.js'
import type { Database, PrismaClient } from '../db/database.js'
import type { StoredLink } from './link-repository.js'

/**
 * The one Prisma method clicksOf uses, answered through the driver (Database.sql): the clicks statement is sent
 * with every read, list and update, and through Prisma's client it cost several times the statement itself.
 * The SQL stays clicksOf's own. (Another method clicksOf might come to use fails at once, in every test.)
 */
const viaDriver = new WeakMap<Database, PrismaClient>()
function driverPrisma(database: Database): PrismaClient {
  let shim = viaDriver.get(database)
  if (!shim) {
    const $queryRawUnsafe = (sql: string, ...params: unknown[]) => database.sql(sql, params)
    shim = { $queryRawUnsafe } as unknown as PrismaClient
    viaDriver.set(database, shim)
  }
  return shim
}

/**
 * The records of a page of links with their all-time clicks: those the links were read with (every plain SQL
 * read, list and update), else read in one statement for the whole page (links Prisma wrote, with pixels).
 */
export async function linkRecords(database: Database, links: StoredLink[]): Promise<LinkRecordBody[]> {
  if (links.every((link) => link.clicks !== undefined)) return links.map((link) => toLinkRecord(link, link.clicks!))
  const clicks = await clicksOf(driverPrisma(database), links.map((link) => link.uniq))
  return links.map((link) => toLinkRecord(link, clicks.get(link.uniq) ?? 0))
}

export async function linkRecord(database: Database, link: StoredLink): Promise<LinkRecordBody> {
  return (await linkRecords(database, [link]))[0]
}

/**
 * The flat record of contract section 3. The password hash never leaves the service. `clicks`: all-time
 * clicks (analytics."LinkClicks"); a link just created has none, since uniqs are never given out twice.
 */
export function toLinkRecord(link: StoredLink, clicks: number): LinkRecordBody {
  return {
    uniq: link.uniq,
    id: link.slug,
    domain: link.domain,
    shortUrl: `https://${link.domain}/${link.slug}`,
    url: link.url,
    title: link.title,
    description: link.description,
    image: link.image,
    favicon: link.favicon,
    extraOptionsGeolocations: link.geolocations as LinkRecordBody['extraOptionsGeolocations'],
    extraOptionsLinkRotator: link.linkRotator as LinkRecordBody['extraOptionsLinkRotator'],
    folderId: link.folderId,
    pixels: link.pixels.map(({ pixel }) => ({
      id: pixel.id,
      platform: pixel.platform as LinkRecordBody['pixels'][number]['platform'],
      value: pixel.value,
      title: pixel.title,
      workspaceId: pixel.workspaceId,
      createdAt: pixel.createdAt.toISOString(),
    })),
    showGDPR: link.showGDPR,
    tags: link.tags,
    note: link.note,
    deepLinkingEnable: link.deepLinkingEnable,
    linkScripts: (link.linkScripts as number[] | null) ?? null,
    linkScriptEnable: link.linkScriptEnable,
    masking: link.masking,
    linkExpiration:
      link.expirationEnable === null
        ? null
        : {
            enable: link.expirationEnable,
            end: link.expiresAt!.toISOString(),
            url: link.expirationUrl,
            timezone: link.expirationTimezone!,
          },
    passwordProtect: link.passwordEnable === null ? null : { enable: link.passwordEnable },
    workspaceId: link.workspaceId,
    createdDate: link.createdAt.toISOString(),
    updatedDate: link.updatedAt.toISOString(),
    clicks,
  }
}
