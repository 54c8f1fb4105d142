/**
 * The rules of contract section 5 that a JSON schema cannot say: tolerant inputs turned into one form,
 * references to the workspace's folders, pixels and scripts checked, and destinations that would loop.
 * Every problem is collected with its JSON pointer, so one 400 names all of them.
 */
import { codePointLength, instantOf, isRowId } from '../../schemas/formats.js'
import { LIMITS, type LinkPatchBody, type PixelInputBody, type Platform } from '../../schemas/link.js'
import type { FieldErrorBody } from '../../schemas/problem.js'
import type { Config } from '../config/config.js'
import type { PrismaClient } from '../db/database.js'
import { fieldError, redirectLoop, validationFailed } from '../errors/app-error.js'
import { checkTogether } from '../errors/field-checks.js'
import { shortDomainsAmong } from './domains.js'
import { pixelId } from '../pixels/pixel-service.js'
import { hashPassword } from './password.js'

/** A pixel of a link before it is stored: one the workspace has, or one to find or create by platform and value. */
export type PixelSpec = { id: string } | { platform: Platform; value: string; title: string | null }

export interface LinkExpiration {
  enable: boolean
  end: Date
  /** null: an expired link answers 410. */
  url: string | null
  timezone: number
}

export interface PasswordSetting {
  enable: boolean
  /**
   * null only while disabled and never given a password. Absent in an update that gives no new password: the
   * stored hash stays as it is when the update is written (a password another request set meanwhile is kept).
   */
  hash?: string | null
}

/** A link's settings in stored form: what create writes and update merges into. */
export interface LinkSettings {
  url: string
  title: string | null
  description: string | null
  image: string | null
  favicon: string | null
  geolocations: { url: string; value: string }[]
  rotator: { url: string; value: number }[]
  folderId: number | null
  pixels: PixelSpec[]
  showGDPR: boolean
  tags: string[]
  note: string | null
  deepLinkingEnable: boolean
  linkScripts: number[] | null
  linkScriptEnable: boolean
  masking: boolean
  expiration: LinkExpiration | null
  password: PasswordSetting | null
}

export const DEFAULT_SETTINGS: Omit<LinkSettings, 'url'> = {
  title: null,
  description: null,
  image: null,
  favicon: null,
  geolocations: [],
  rotator: [],
  folderId: null,
  pixels: [],
  showGDPR: false,
  tags: [],
  note: null,
  deepLinkingEnable: false,
  linkScripts: null,
  linkScriptEnable: false,
  masking: false,
  expiration: null,
  password: null,
}

export interface InputContext {
  prisma: PrismaClient
  config: Config
  workspaceId: number
  /** The stored password hash of the link being updated, which `{enable: true}` alone keeps. */
  storedPasswordHash?: string | null
}

/** Parses the link fields present in `input` into stored form; throws 400 naming every bad field. */
export async function parseLinkInput(input: LinkPatchBody, context: InputContext): Promise<Partial<LinkSettings>> {
  const errors: FieldErrorBody[] = []
  const fail = (field: string, message: string) => errors.push({ path: `/link/${field}`, message })
  const out: Partial<LinkSettings> = {}
  const has = (field: keyof LinkPatchBody) => Object.prototype.hasOwnProperty.call(input, field)

  if (input.url !== undefined) out.url = input.url
  if (has('title')) out.title = input.title ?? null
  if (has('description')) out.description = input.description ?? null
  if (has('note')) out.note = input.note ?? null
  // "" is no URL: it stores null, which autofill may then fill.
  if (has('image')) out.image = input.image || null
  if (has('favicon')) out.favicon = input.favicon || null
  for (const flag of ['showGDPR', 'deepLinkingEnable', 'linkScriptEnable', 'masking'] as const) {
    if (input[flag] !== undefined) out[flag] = input[flag]
  }

  if (input.tags !== undefined) out.tags = parseTags(input.tags, fail)
  if (input.extraOptionsGeolocations !== undefined) {
    const seen = new Set<string>()
    out.geolocations = input.extraOptionsGeolocations.map((rule, index) => {
      const value = rule.value.toUpperCase()
      if (seen.has(value)) fail(`extraOptionsGeolocations/${index}/value`, `has ${value} a second time`)
      seen.add(value)
      return { url: rule.url, value }
    })
  }
  if (input.extraOptionsLinkRotator !== undefined) {
    out.rotator = input.extraOptionsLinkRotator.map((entry, index) => {
      const weight = Number(entry.value)
      if (!Number.isInteger(weight) || weight < 1 || weight > 100) {
        fail(`extraOptionsLinkRotator/${index}/value`, 'must be a weight from 1 to 100')
      }
      return { url: entry.url, value: weight }
    })
    const total = out.rotator.reduce((sum, entry) => sum + entry.value, 0)
    if (total > 100) fail('extraOptionsLinkRotator', `weights add up to ${total}; they may add up to at most 100`)
  }
  if (has('folderId')) out.folderId = await parseFolderId(input.folderId ?? null, context, fail)
  if (has('linkScripts')) out.linkScripts = await parseLinkScripts(input.linkScripts ?? null, context, fail)
  if (input.pixels !== undefined) out.pixels = await parsePixels(input.pixels.map(withStoredPixelId), context, fail)
  if (has('linkExpiration')) {
    const expiration = input.linkExpiration
    if (!expiration) out.expiration = null
    else {
      const end = instantOf(expiration.end)
      // The format allows the years 0000 to 9999 in any offset; PostgreSQL has no year 0, and a year past 9999
      // in UTC has no ISO 8601 form of four digits: both would fail in the database.
      const year = end.getUTCFullYear()
      if (Number.isNaN(end.getTime())) fail('linkExpiration/end', 'must be an ISO 8601 date-time')
      else if (year < 1 || year > 9999) fail('linkExpiration/end', 'must be between the years 0001 and 9999 (UTC)')
      out.expiration = { enable: expiration.enable, end, url: expiration.url ?? null, timezone: expiration.timezone }
    }
  }
  if (has('passwordProtect')) {
    const protect = input.passwordProtect
    if (!protect) out.password = null
    else {
      if (protect.enable && protect.password === undefined && !context.storedPasswordHash) {
        fail('passwordProtect/password', 'is required to enable password protection')
      }
      // A new password is hashed by hashNewPassword, once the request has passed every check and its quota;
      // without one, the hash is left as stored (`hash` absent).
      out.password = protect.password !== undefined ? { enable: protect.enable, hash: null } : { enable: protect.enable }
    }
  }

  // The destinations that pass their rules are checked for loops even when other fields failed: one 400 names all.
  await checkTogether(errors.length > 0 ? Promise.reject(validationFailed(errors)) : Promise.resolve(), refuseRedirectLoops(out, context))
  return out
}

/**
 * Hashes the new password of `input`, if it gives one, into what parseLinkInput made of it. Called once the
 * request is known to succeed but for its write: past the domain, slug and quota checks. scrypt takes tens of
 * milliseconds and 32 MiB of one of libuv's four threads, which the visitors' password checks share: a request
 * that is refused (and so counts against no quota) must not cost that.
 */
export async function hashNewPassword(settings: Partial<LinkSettings>, input: LinkPatchBody): Promise<void> {
  const password = input.passwordProtect?.password
  if (password !== undefined && settings.password) settings.password.hash = await hashPassword(password)
}

/**
 * The `tag` filter of the list and the stats (`?tag=a&tag=b`): each tag as stored for matching (trimmed, lower
 * case), once. A blank one is a 400, as an empty one is: dropped, it widened the answer to every link.
 */
export function tagFilterKeys(tags: string[] | undefined): string[] {
  const keys = (tags ?? []).map((tag) => tag.trim().toLowerCase())
  if (keys.includes('')) throw fieldError('/tag', 'must not be blank')
  return [...new Set(keys)]
}

function parseTags(tags: string | string[], fail: (field: string, message: string) => void): string[] {
  const fromString = typeof tags === 'string'
  const list = fromString ? tags.split(',') : tags
  const kept = new Map<string, string>()
  list.forEach((raw, index) => {
    const tag = raw.trim()
    if (!tag) return
    // Characters, as every other length rule counts them (AJV's maxLength too): an emoji is one, not two.
    if (codePointLength(tag) > LIMITS.tag) fail(fromString ? 'tags' : `tags/${index}`, `must be at most ${LIMITS.tag} characters`)
    const key = tag.toLowerCase()
    if (!kept.has(key)) kept.set(key, tag)
  })
  if (kept.size > LIMITS.tags) fail('tags', `must hold at most ${LIMITS.tags} tags (has ${kept.size})`)
  return [...kept.values()]
}

async function parseFolderId(
  folderId: number | string | null,
  context: InputContext,
  fail: (field: string, message: string) => void,
): Promise<number | null> {
  if (folderId === null) return null
  const id = Number(folderId)
  const exists =
    isRowId(id) &&
    (await context.prisma.folder.count({ where: { id, workspaceId: context.workspaceId } })) > 0
  if (!exists) fail('folderId', 'is not a folder of this workspace')
  return id
}

async function parseLinkScripts(
  ids: number[] | null,
  context: InputContext,
  fail: (field: string, message: string) => void,
): Promise<number[] | null> {
  if (ids === null) return null
  const candidates = ids.filter(isRowId)
  const found = new Set(
    (
      await context.prisma.script.findMany({
        where: { id: { in: candidates }, workspaceId: context.workspaceId },
        select: { id: true },
      })
    ).map((script) => script.id),
  )
  ids.forEach((id, index) => {
    if (!found.has(id)) fail(`linkScripts/${index}`, 'is not a script of this workspace')
  })
  return [...new Set(ids)]
}

/**
 * A pixel's id as stored: the uuid format also accepts "urn:uuid:…" (and upper case), which the uuid column
 * does not; the pixel routes take the same forms (src/pixels/pixel-service.ts).
 */
function withStoredPixelId(pixel: PixelInputBody | string): PixelInputBody | string {
  if (typeof pixel === 'string') return pixelId(pixel)
  return pixel.id === undefined ? pixel : { ...pixel, id: pixelId(pixel.id) }
}

async function parsePixels(
  pixels: (PixelInputBody | string)[],
  context: InputContext,
  fail: (field: string, message: string) => void,
): Promise<PixelSpec[]> {
  const referenced = pixels.flatMap((pixel) => (typeof pixel === 'string' ? [pixel] : pixel.id ? [pixel.id] : []))
  // Pixels given by platform and value only: no round trip (Prisma would send a query for an empty list).
  const owned = new Set(
    referenced.length === 0
      ? []
      : (
          await context.prisma.pixel.findMany({
            where: { id: { in: referenced.map((id) => id.toLowerCase()) }, workspaceId: context.workspaceId },
            select: { id: true },
          })
        ).map((pixel) => pixel.id),
  )
  return pixels.map((pixel, index): PixelSpec => {
    if (typeof pixel === 'string') {
      if (!owned.has(pixel.toLowerCase())) fail(`pixels/${index}`, 'is not a pixel of this workspace')
      return { id: pixel.toLowerCase() }
    }
    // An id the workspace does not have is ignored: the pixel is found or created by platform and value.
    if (pixel.id && owned.has(pixel.id.toLowerCase())) return { id: pixel.id.toLowerCase() }
    return { platform: pixel.platform, value: pixel.value, title: pixel.title ?? null }
  })
}

/** A destination on one of the service's own short domains would send visitors round in circles. */
async function refuseRedirectLoops(settings: Partial<LinkSettings>, context: InputContext): Promise<void> {
  const destinations: [string, string][] = []
  if (settings.url) destinations.push(['/link/url', settings.url])
  settings.geolocations?.forEach((rule, index) => destinations.push([`/link/extraOptionsGeolocations/${index}/url`, rule.url]))
  settings.rotator?.forEach((entry, index) => destinations.push([`/link/extraOptionsLinkRotator/${index}/url`, entry.url]))
  if (settings.expiration?.url) destinations.push(['/link/linkExpiration/url', settings.expiration.url])
  if (destinations.length === 0) return

  const hostOf = (url: string) => new URL(url).hostname.toLowerCase().replace(/\.$/, '')
  const shortDomains = await shortDomainsAmong(context.prisma, context.config, [
    ...new Set(destinations.map(([, url]) => hostOf(url))),
  ])
  const loops = destinations.filter(([, url]) => shortDomains.has(hostOf(url))).map(([path, url]) => ({ path, host: hostOf(url) }))
  if (loops.length > 0) throw redirectLoop(...loops)
}
