/** Create and update: the rules of contract sections 4, 5 and 7 around the repository. */
import { isRowId } from '../../schemas/formats.js'
import { SLUG_PATTERN, type CreateLinkRequest, type LinkPatchBody, type UpdateLinkRequest } from '../../schemas/link.js'
import type { Config } from '../config/config.js'
import { normalizeHost } from '../config/config.js'
import type { Database, PrismaClient } from '../db/database.js'
import { isUniqueViolation, violatedForeignKey } from '../db/errors.js'
import { SKIPPED, type Autofill, type AutofillResult } from '../autofill/autofill.js'
import type { MetadataField, PageMetadata } from '../autofill/metadata.js'
import { changesNothing } from './unchanged.js'
import type { FieldErrorBody } from '../../schemas/problem.js'
import { AppError, fieldError, notFound, slugReserved, slugTaken, validationFailed } from '../errors/app-error.js'
import { checkTogether } from '../errors/field-checks.js'
import type { Caller } from '../plugins/auth.js'
import { domainsBarredFrom, refuseReservedLinkWrite, resolveLinkDomain } from './domains.js'
import { DEFAULT_SETTINGS, hashNewPassword, parseLinkInput, type LinkSettings } from './link-input.js'
import { findLinkBySlug, findLinkByUniq, insertLink, slugInUse, updateLink, updateLinkColumns, type IdempotentCreateKey, type StoredLink } from './link-repository.js'
import { generateSlug, isReservedSlug, slugKey } from './slug.js'

export interface LinkServiceContext {
  prisma: PrismaClient
  /** The same database, for the plain SQL of the hottest statements (link-repository.ts). */
  database: Database
  config: Config
  autofill: Autofill
  /** Told of the links created, updated or deleted by each request (the visitor side's cache forgets them). */
  onChange?: (links: { domain: string; slug: string }[]) => void
  /** Told of the links of a write that failed once it may have reached the database (see uncertainOnFailure). */
  onUncertain?: (links: LinkLocator[]) => void
  /** Whether the instance is closing (SIGTERM): a bulk create then fetches no more pages (link-bulk.ts). */
  closing?: () => boolean
}

/**
 * `write`, telling onUncertain of `links` should it fail other than with the service's own answer: PostgreSQL may
 * have stored it all the same (its answer lost with the connection, or a statement given up on here committing
 * later), and visitors must not keep seeing the link as it was for the redirect cache's lifetime.
 */
export async function uncertainOnFailure<T>(context: LinkServiceContext, links: LinkLocator[], write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (error) {
    if (!(error instanceof AppError)) context.onUncertain?.(links)
    throw error
  }
}

/** A stored link and what autofill did to it (the X-Autofill header). */
export interface LinkWrite {
  link: StoredLink
  autofill: AutofillResult
}

/**
 * Awaited once the request is known to be valid and right before the link is stored (and before any
 * autofill fetch): the quota check of src/plugins/rate-limits.ts, which throws 429 when the workspace is
 * over its quota. Every successful create and update passes through it.
 */
export type Admit = () => Promise<void>

/** Attempts at a fresh random slug before giving up; with 36^7 slugs a second attempt is already rare. */
const GENERATED_SLUG_ATTEMPTS = 8

/**
 * A new link's checks beyond the schema (its fields' rules, its domain, a reserved slug), for a create and for each
 * link of a bulk: the rules and the domain together, so that one 400 names the fields of both.
 */
export async function checkNewLink(
  context: LinkServiceContext,
  caller: Caller,
  link: CreateLinkRequest['link'],
): Promise<{ parsed: Partial<LinkSettings>; domain: string }> {
  const [parsed, domain] = await checkTogether(
    parseLinkInput(link, { ...context, workspaceId: caller.workspaceId }),
    resolveLinkDomain(context.prisma, context.config, caller, link.domain),
    (async () => {
      if (link.id !== undefined && isReservedSlug(link.id)) throw slugReserved(link.id)
    })(),
  )
  return { parsed, domain }
}

export async function createLink(
  context: LinkServiceContext,
  caller: Caller,
  request: CreateLinkRequest,
  admit: Admit,
  /** The request's Idempotency-Key, stored with the link (IdempotentCreate). */
  idempotency?: Omit<IdempotentCreateKey, 'autofill'>,
): Promise<LinkWrite> {
  const { link } = request
  const { parsed, domain } = await checkNewLink(context, caller, link)

  const settings: LinkSettings = { ...DEFAULT_SETTINGS, ...parsed, url: link.url }
  // A slug already taken would make the fetch wasted, and hold the quota slot for its whole length. Without a
  // fetch the insert finds out for free; but a full quota must not hide the 409 (clients retry with a suffix on 409).
  const taken = async () => link.id !== undefined && (await slugInUse(context.database, domain, link.id))
  if (request.autofill !== false && (await taken())) throw slugTaken(domain, link.id!)
  try {
    await admit()
  } catch (error) {
    if (request.autofill === false && (await taken())) throw slugTaken(domain, link.id!)
    throw error
  }
  await hashNewPassword(settings, link)
  // Outside any transaction: a fetch may take the whole AUTOFILL_TIMEOUT_MS.
  const autofill = request.autofill === false ? SKIPPED : await context.autofill.fill(settings.url, settings)
  Object.assign(settings, autofill.filled)
  const keyed = idempotency && { ...idempotency, autofill: autofill.status }
  const stored = await insertWithSlug(context, caller, domain, link.id, settings, keyed)
  // A visitor may have been told moments ago that this address does not exist.
  context.onChange?.([stored])
  return { link: stored, autofill }
}

/** Stores the link at `slug`, or at a fresh random slug when none is given. */
export async function insertWithSlug(
  context: LinkServiceContext,
  caller: Caller,
  domain: string,
  slug: string | undefined,
  settings: LinkSettings,
  idempotency?: IdempotentCreateKey,
): Promise<StoredLink> {
  if (slug !== undefined) {
    try {
      return await insertLink(context.database, { workspaceId: caller.workspaceId, domain, slug, settings, idempotency })
    } catch (error) {
      if (isUniqueViolation(error)) throw slugTaken(domain, slug)
      throw folderGone(error) ?? error
    }
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await insertLink(context.database, { workspaceId: caller.workspaceId, domain, slug: generateSlug(), settings, idempotency })
    } catch (error) {
      if (!isUniqueViolation(error) || attempt >= GENERATED_SLUG_ATTEMPTS) throw folderGone(error) ?? error
    }
  }
}

/**
 * The folder was checked when the request was read and deleted by another request before the link was
 * stored: the same 400 as for a folder the workspace never had. (Pixels and scripts are locked by the write
 * itself, see link-repository.ts; a folder is guarded by its foreign key.)
 */
export function folderGone(error: unknown) {
  return violatedForeignKey(error) === 'Link_folderId_fkey' ? fieldError('/link/folderId', 'is not a folder of this workspace') : undefined
}

export type LinkLocator = { uniq: number } | { domain: string; slug: string }

/**
 * The locator as the database looks it up (the domain normalised), or null when no link can match it. The route's
 * schema keeps ids within the column's range; beyond it asking the database would be an error, not a miss, so a
 * caller that skipped the schema still gets a 404.
 */
export function storedLocator(locator: LinkLocator): LinkLocator | null {
  if ('uniq' in locator) return isRowId(locator.uniq) ? locator : null
  const domain = normalizeHost(locator.domain)
  // A slug of other characters names no link; matched in any case, it could be another's (K, the Kelvin sign, is k).
  return domain && SLUG.test(locator.slug) ? { domain, slug: locator.slug } : null
}

const SLUG = new RegExp(SLUG_PATTERN)

export async function findLink(context: LinkServiceContext, caller: Caller, locator: LinkLocator): Promise<StoredLink> {
  const where = storedLocator(locator)
  let link: StoredLink | null = null
  if (where && 'uniq' in where) link = await findLinkByUniq(context.database, caller.workspaceId, where.uniq)
  else if (where) link = await findLinkBySlug(context.database, caller.workspaceId, where.domain, where.slug)
  if (!link) throw notFound()
  return link
}

/** The link's own domain and slug may be repeated in an update body, but not changed. */
async function refuseIdentityChange(link: StoredLink, patch: LinkPatchBody): Promise<void> {
  const problems: FieldErrorBody[] = []
  if (patch.domain !== undefined && normalizeHost(patch.domain) !== link.domain) {
    problems.push({ path: '/link/domain', message: `cannot be changed (the link is on ${link.domain})` })
  }
  if (patch.id !== undefined && slugKey(patch.id) !== slugKey(link.slug)) {
    problems.push({ path: '/link/id', message: `cannot be changed (the link's id is ${link.slug})` })
  }
  if (problems.length > 0) throw validationFailed(problems)
}

/**
 * The fields of a patch that are columns of the link's own row, merged without knowing what is stored: not the
 * password (it may keep the stored hash), pixels and scripts (rows of their own), tags and folder (they move the
 * link's history between groups); `domain` and `id` may be repeated and are then matched.
 */
const ONE_STATEMENT_FIELDS: ReadonlySet<string> = new Set<keyof LinkPatchBody>([
  'url', 'title', 'description', 'image', 'favicon', 'note', 'showGDPR', 'deepLinkingEnable', 'linkScriptEnable', 'masking',
  'extraOptionsGeolocations', 'extraOptionsLinkRotator', 'linkExpiration', 'domain', 'id',
])

/**
 * The common update (a client changes a title or a url, autofill off, by uniq) as one UPDATE, without reading the
 * link first: the read cost as much as the write. Null whenever the full path must decide: no such link, a link on
 * a reserved domain and a token that is not official (its 403), another domain or id in the body (its 404 or
 * 400), a 400 of the fields (after the 404 there, as always), or fields this path does not write.
 */
async function updateWithoutReading(
  context: LinkServiceContext,
  caller: Caller,
  locator: LinkLocator,
  request: UpdateLinkRequest,
  admit: Admit,
): Promise<LinkWrite | null> {
  const patch = request.link
  if (request.autofill !== false || !('uniq' in locator) || !isRowId(locator.uniq)) return null
  if (!Object.keys(patch).every((field) => ONE_STATEMENT_FIELDS.has(field))) return null
  const domain = patch.domain === undefined ? undefined : normalizeHost(patch.domain)
  if (patch.domain !== undefined && !domain) return null
  let changes: Partial<LinkSettings>
  try {
    changes = await parseLinkInput(patch, { ...context, workspaceId: caller.workspaceId })
  } catch (error) {
    if (error instanceof AppError && error.status === 400) return null
    throw error
  }
  if (Object.keys(changes).length === 0) return null
  try {
    await admit()
  } catch {
    // Over the quota (or no quota store): the full path says so, once its 404 and 400 have had their turn.
    return null
  }
  const where = {
    uniq: locator.uniq,
    workspaceId: caller.workspaceId,
    domain,
    slugKey: patch.id === undefined ? undefined : slugKey(patch.id),
    notOnDomains: domainsBarredFrom(context.config, caller),
  }
  const link = await uncertainOnFailure(context, [{ uniq: locator.uniq }], () => updateLinkColumns(context.database, where, changes))
  if (!link) return null
  context.onChange?.([link])
  return { link, autofill: SKIPPED }
}

/** Merges the fields present in the request into the stored link (contract section 7). */
export async function updateLinkFields(
  context: LinkServiceContext,
  caller: Caller,
  locator: LinkLocator,
  request: UpdateLinkRequest,
  admit: Admit,
): Promise<LinkWrite> {
  const written = await updateWithoutReading(context, caller, locator, request, admit)
  if (written) return written
  const link = await findLink(context, caller, locator)
  refuseReservedLinkWrite(context.config, caller, link)
  const [, changes] = await checkTogether(
    refuseIdentityChange(link, request.link),
    parseLinkInput(request.link, { ...context, workspaceId: caller.workspaceId, storedPasswordHash: link.passwordHash }),
  )
  // Even an update that changes nothing is a successful update: it is admitted (and counted) like any other.
  await admit()
  await hashNewPassword(changes, request.link)
  // An empty `link` (no field but the link's own domain and id, or none the API knows) returns the link unchanged
  // (contract section 7): nothing is fetched, and updatedDate stays.
  if (Object.keys(changes).length === 0) return { link, autofill: SKIPPED }
  const merged = { ...link, ...changes }
  // Any other update runs autofill when a field is empty after the merge (section 12), even one that only repeats
  // what is stored (a client asking for `title: null` to be filled); if nothing is filled, nothing is written.
  const autofill = request.autofill === false ? SKIPPED : await context.autofill.fill(merged.url, merged)
  if (changesNothing(link, changes) && Object.keys(autofill.filled).length === 0) return { link, autofill }
  // A field the request emptied takes the page's value as it is; one it left alone only if still empty (updateLink).
  const set: Partial<LinkSettings> = { ...changes }
  const fill: PageMetadata = {}
  for (const [field, value] of Object.entries(autofill.filled) as [MetadataField, string][]) {
    if (changes[field] !== undefined) set[field] = value
    else fill[field] = value
  }
  let updated: StoredLink | null
  try {
    updated = await uncertainOnFailure(context, [link], () => updateLink(context.database, link, set, fill))
  } catch (error) {
    throw folderGone(error) ?? error
  }
  if (!updated) throw notFound()
  context.onChange?.([updated])
  return { link: updated, autofill }
}
