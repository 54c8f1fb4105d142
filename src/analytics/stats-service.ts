/** The stats of one link and of a workspace: the range checked, then the series and the top lists read at once. */
import { MAX_POINTS, STATS_LIMIT, type LinkStatsBody, type StatsRequest, type TopEntryBody, type WorkspaceStatsBody, type WorkspaceStatsRequest } from '../../schemas/stats.js'
import { normalizeHost, type Config } from '../config/config.js'
import type { PrismaClient } from '../db/database.js'
import { fieldError } from '../errors/app-error.js'
import { tagFilterKeys } from '../links/link-input.js'
import type { StoredLink } from '../links/link-repository.js'
import type { Caller } from '../plugins/auth.js'
import { GROUP_TABLES, LINK_TABLES, WORKSPACE_TABLES, readSeries, readTopLinks, readTops, withPendingFrom, type StatsSource, type TopDimension, type TopRow } from './stats-queries.js'
import { formatInZone, parseRange, tooManyPoints, type StatsRange } from './stats-range.js'

export interface StatsContext {
  prisma: PrismaClient
  config: Config
  /** The clock (tests). */
  now?: () => Date
}

type Common = Omit<LinkStatsBody, 'link' | 'top'>
type Tops = LinkStatsBody['top']

const TOP_NAMES: Record<TopDimension, keyof Tops> = {
  country: 'countries',
  referrer: 'referrers',
  device: 'devices',
  os: 'os',
  browser: 'browsers',
  destination: 'destinations',
}

function toTops(rows: TopRow[]): Tops {
  const tops: Tops = { countries: [], referrers: [], devices: [], os: [], browsers: [], destinations: [] }
  for (const row of rows) {
    const entry: TopEntryBody = { value: row.value === '' ? null : row.value, clicks: row.clicks, visitors: row.visitors }
    tops[TOP_NAMES[row.dimension]].push(entry)
  }
  return tops
}

/** Series and tops of one source, read side by side (two connections of the pool). */
async function read(context: StatsContext, given: StatsSource, range: StatsRange, limit: number) {
  const source = await withPendingFrom(context.prisma, given)
  const [series, tops, links] = await Promise.all([
    readSeries(context.prisma, source, range),
    readTops(context.prisma, source, range, limit),
    readTopLinks(context.prisma, source, range, limit),
  ])
  // The exact count needs the zone's calendar; parseRange already refused anything far beyond it.
  if (series.length > MAX_POINTS) throw tooManyPoints(range.interval)
  const totals = { clicks: 0, visitors: 0, bots: 0 }
  for (const bucket of series) {
    totals.clicks += bucket.clicks
    totals.visitors += bucket.visitors
    totals.bots += bucket.bots
  }
  const common: Common = {
    from: formatInZone(range.from, range.timezone),
    to: formatInZone(range.to, range.timezone),
    timezone: range.timezone,
    interval: range.interval,
    totals,
    series: series.map((bucket) => ({ ...bucket, start: formatInZone(bucket.start, range.timezone) })),
  }
  return { common, tops: toTops(tops), links }
}

const now = (context: StatsContext) => context.now?.() ?? new Date()

export async function linkStats(context: StatsContext, link: StoredLink, query: StatsRequest): Promise<LinkStatsBody> {
  const range = parseRange(query, now(context))
  const source: StatsSource = { tables: LINK_TABLES, where: 'h."linkUniq" = $1::int', params: [link.uniq] }
  const { common, tops } = await read(context, source, range, query.limit ?? STATS_LIMIT.default)
  return { link: { uniq: link.uniq, domain: link.domain, slug: link.slug }, ...common, top: tops }
}

/** A domain filter must name one of the workspace's domains, or one of the service's that its links may use. */
async function checkDomain(context: StatsContext, caller: Caller, given: string): Promise<string> {
  const domain = normalizeHost(given)
  if (!domain) throw fieldError('/domain', 'must be a valid host name')
  if (domain === context.config.defaultDomain || context.config.reservedDomains.includes(domain)) return domain
  const owned = await context.prisma.domain.findUnique({ where: { host: domain }, select: { workspaceId: true } })
  if (owned?.workspaceId !== caller.workspaceId) throw fieldError('/domain', "is not one of the workspace's domains")
  return domain
}

/**
 * Which aggregates answer a workspace's stats: the workspace's for the whole workspace and a domain; a group's
 * (GroupHourly, GroupDaily) for one tag or one folder, with or without a domain. Other combinations (two tags, a
 * tag and a folder) are not in any aggregate: the links that match are summed one by one (the per-link path,
 * slower). A group's visitors are its links' own summed (a visitor of two of them on one day counts twice), as the
 * per-link path counts them, so that both answer the same.
 */
async function workspaceSource(context: StatsContext, caller: Caller, query: WorkspaceStatsRequest, paths: StatsPaths): Promise<StatsSource> {
  const domain = query.domain === undefined ? undefined : await checkDomain(context, caller, query.domain)
  const tagKeys = tagFilterKeys(query.tag)
  if (tagKeys.length === 0 && query.folderId === undefined) {
    return {
      tables: WORKSPACE_TABLES,
      where: domain === undefined ? 'h."workspaceId" = $1::int' : 'h."workspaceId" = $1::int AND h."domain" = $2::text',
      params: domain === undefined ? [caller.workspaceId] : [caller.workspaceId, domain],
      links: { workspaceId: caller.workspaceId, byDimension: true, among: { sql: 'SELECT l."uniq" FROM "Link" l WHERE l."workspaceId" = $1::int', params: [caller.workspaceId] } },
    }
  }
  if (paths.groups && tagKeys.length + (query.folderId === undefined ? 0 : 1) === 1) {
    return groupSource(caller, tagKeys[0], query.folderId, domain)
  }
  const params: unknown[] = [caller.workspaceId]
  const conditions = ['l."workspaceId" = $1::int']
  if (domain !== undefined) conditions.push(`l."domain" = $${params.push(domain)}::text`)
  if (tagKeys.length > 0) conditions.push(`l."tagKeys" @> $${params.push(tagKeys)}::text[]`)
  if (query.folderId !== undefined) conditions.push(`l."folderId" = $${params.push(query.folderId)}::int`)
  const among = `SELECT l."uniq" FROM "Link" l WHERE ${conditions.join(' AND ')}`
  return {
    tables: LINK_TABLES,
    where: `h."linkUniq" IN (${among})`,
    params,
    links: { workspaceId: caller.workspaceId, byDimension: false, among: { sql: among, params } },
  }
}

/** One tag's or one folder's aggregates; its raw visits are those of the links in the group now. */
function groupSource(caller: Caller, tagKey: string | undefined, folderId: number | undefined, domain: string | undefined): StatsSource {
  const params: unknown[] = [caller.workspaceId, tagKey ?? String(folderId)]
  const kind = tagKey === undefined ? 'folder' : 'tag'
  const member = tagKey === undefined ? 'l."folderId" = $2::text::int' : 'l."tagKeys" @> ARRAY[$2::text]'
  const [onDomain, linkOnDomain] = domain === undefined ? ['', ''] : [` AND h."domain" = $3::text`, ` AND l."domain" = $3::text`]
  if (domain !== undefined) params.push(domain)
  const among = `SELECT l."uniq" FROM "Link" l WHERE l."workspaceId" = $1::int AND ${member}${linkOnDomain}`
  return {
    tables: GROUP_TABLES,
    where: `h."workspaceId" = $1::int AND h."groupKind" = '${kind}' AND h."groupValue" = $2::text${onDomain}`,
    visits: `h."linkUniq" IN (${among})`,
    params,
    links: { workspaceId: caller.workspaceId, byDimension: true, among: { sql: among, params } },
  }
}

/** Which paths may answer (tests compare the group path to the per-link one). */
export interface StatsPaths {
  groups: boolean
}

export async function workspaceStats(
  context: StatsContext,
  caller: Caller,
  query: WorkspaceStatsRequest,
  paths: StatsPaths = { groups: true },
): Promise<WorkspaceStatsBody> {
  const range = parseRange(query, now(context))
  const source = await workspaceSource(context, caller, query, paths)
  const { common, tops, links } = await read(context, source, range, query.limit ?? STATS_LIMIT.default)
  return { ...common, top: { ...tops, links } }
}
