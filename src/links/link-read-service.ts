/** The list (filters, keyset pages) and delete, beside create and update in link-service.ts. */
import { isRowId } from '../../schemas/formats.js'
import { LIST_LIMIT, type ListLinksRequest } from '../../schemas/link-list.js'
import { normalizeHost } from '../config/config.js'
import { parseInstant, type InstantBounds } from '../analytics/stats-range.js'
import { fieldError, notFound } from '../errors/app-error.js'
import type { Caller } from '../plugins/auth.js'
import { deleteLinkByUniq, deletePlainLink, findLinksPage, type LinkFilter, type StoredLink } from './link-repository.js'
import { domainsBarredFrom, refuseReservedLinkWrite } from './domains.js'
import { tagFilterKeys } from './link-input.js'
import { findLink, storedLocator, uncertainOnFailure, type LinkLocator, type LinkServiceContext } from './link-service.js'

/**
 * A page's position is the uniq of its last link: the next page is the links below it. New links get higher
 * uniqs, so links created while a client pages land before its position and never shift the pages after it
 * (no duplicates, no gaps), which an offset could not promise. The JSON is wrapped in base64url so clients
 * treat it as opaque and it can gain fields later.
 */
export function encodeCursor(lastUniq: number): string {
  return Buffer.from(JSON.stringify({ u: lastUniq })).toString('base64url')
}

export function decodeCursor(cursor: string): number {
  let position: unknown
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error('not base64url')
    position = (JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { u?: unknown }).u
  } catch {
    position = undefined
  }
  if (typeof position !== 'number' || !isRowId(position)) {
    throw fieldError('/cursor', 'is not the nextCursor of a page of this list')
  }
  return position
}

/** As for linkExpiration.end: PostgreSQL has no year 0, and takes no year past 9999 as JavaScript writes it. */
const LIST_INSTANTS: InstantBounds = {
  earliest: Date.parse('0001-01-01T00:00:00Z'),
  latest: Date.parse('9999-12-31T23:59:59.999Z'),
  text: 'between the years 0001 and 9999 (UTC)',
}

export async function listLinks(
  context: LinkServiceContext,
  caller: Caller,
  query: ListLinksRequest,
): Promise<{ links: StoredLink[]; nextCursor: string | null }> {
  const filter: LinkFilter = { workspaceId: caller.workspaceId, folderId: query.folderId }
  if (query.cursor !== undefined) filter.beforeUniq = decodeCursor(query.cursor)
  if (query.domain !== undefined) {
    filter.domain = normalizeHost(query.domain)
    if (!filter.domain) throw fieldError('/domain', 'must be a valid host name')
  }
  if (query.tag) filter.tagKeys = tagFilterKeys(query.tag)
  if (query.q !== undefined) filter.search = query.q
  filter.createdFrom = parseInstant(query.createdAfter, '/createdAfter', LIST_INSTANTS)
  filter.createdBefore = parseInstant(query.createdBefore, '/createdBefore', LIST_INSTANTS)

  // One link more than the page tells whether another page follows, without counting.
  const limit = query.limit ?? LIST_LIMIT.default
  const rows = await findLinksPage(context.database, filter, limit + 1)
  const links = rows.slice(0, limit)
  const nextCursor = rows.length > limit ? encodeCursor(links[links.length - 1].uniq) : null
  return { links, nextCursor }
}

/** A hard delete: the slug is free again at once and the address stops redirecting. */
export async function deleteLink(context: LinkServiceContext, caller: Caller, locator: LinkLocator): Promise<void> {
  const where = storedLocator(locator)
  // Most links are in no group: one statement deletes them and says which they were.
  const plain =
    where && (await uncertainOnFailure(context, [where], () => deletePlainLink(context.database, caller.workspaceId, where, domainsBarredFrom(context.config, caller))))
  if (plain) {
    context.onChange?.([plain])
    return
  }
  // No such link (a 404), one on a reserved domain (a 403), or one with a tag or folder, whose delete moves its
  // group history.
  const link = await findLink(context, caller, locator)
  refuseReservedLinkWrite(context.config, caller, link)
  // Deleted by a concurrent request since it was found: this request did not delete it.
  if (!(await uncertainOnFailure(context, [link], () => deleteLinkByUniq(context.database, caller.workspaceId, link.uniq)))) throw notFound()
  context.onChange?.([link])
}
