import type { Config } from '../config/config.js'
import { normalizeHost } from '../config/config.js'
import type { PrismaClient } from '../db/database.js'
import { domainNotAllowed, domainReserved, fieldError, reservedLinkUnchangeable } from '../errors/app-error.js'
import type { Caller } from '../plugins/auth.js'
import { CACHE_TTL_MS, domainsGeneration } from '../cache/change-notices.js'
import { TtlCache } from '../cache/ttl-cache.js'

/**
 * Domains change only through the command line, and every create reads them (the workspace's default, the
 * owner of the host asked for, and whether each destination's host is a short domain): kept per database for
 * CACHE_TTL_MS, so a domain added elsewhere is used within that time (at once in this process).
 */
interface DomainCaches {
  defaults: TtlCache<number, string | null>
  owners: TtlCache<string, number | null>
}
const DOMAIN_CACHE_ENTRIES = 10_000
const cachesByDatabase = new WeakMap<PrismaClient, DomainCaches>()
function caches(prisma: PrismaClient): DomainCaches {
  let found = cachesByDatabase.get(prisma)
  if (!found) {
    const options = { ttlMs: CACHE_TTL_MS, maxEntries: DOMAIN_CACHE_ENTRIES, generation: domainsGeneration }
    found = { defaults: new TtlCache(options), owners: new TtlCache(options) }
    cachesByDatabase.set(prisma, found)
  }
  return found
}

/** The workspace's default domain, or null. */
function workspaceDefault(prisma: PrismaClient, workspaceId: number): Promise<string | null> {
  return caches(prisma).defaults.get(workspaceId, async () => {
    // One default per workspace (domain:add takes turns on the workspace); a database where an older race left
    // two answers the one added last, every time.
    const row = await prisma.domain.findFirst({ where: { workspaceId, isDefault: true }, orderBy: { id: 'desc' }, select: { host: true } })
    return row?.host ?? null
  })
}

/** The workspace a host belongs to, or null when it is no workspace's domain. */
export function domainOwner(prisma: PrismaClient, host: string): Promise<number | null> {
  return caches(prisma).owners.get(host, async () => {
    const row = await prisma.domain.findUnique({ where: { host }, select: { workspaceId: true } })
    return row?.workspaceId ?? null
  })
}

/**
 * The domain a new link goes on: the one asked for, else the workspace's default, else the service's.
 * Reserved domains are for official tokens only; any other domain must be the workspace's own.
 */
export async function resolveLinkDomain(
  prisma: PrismaClient,
  config: Config,
  caller: Caller,
  requested: string | undefined,
): Promise<string> {
  let host: string
  if (requested === undefined) {
    host = (await workspaceDefault(prisma, caller.workspaceId)) ?? config.defaultDomain
  } else {
    const normalized = normalizeHost(requested)
    if (!normalized) throw fieldError('/link/domain', 'must be a valid host name')
    host = normalized
  }

  if (config.reservedDomains.includes(host)) {
    if (!caller.official) throw domainReserved(host)
    return host
  }
  if ((await domainOwner(prisma, host)) !== caller.workspaceId) throw domainNotAllowed(host)
  return host
}

/**
 * The domains whose links the caller may read but not change or delete: the reserved ones, unless the token is
 * official (contract section 2: only official tokens may use them).
 */
export const domainsBarredFrom = (config: Config, caller: Caller): readonly string[] => (caller.official ? [] : config.reservedDomains)

/** Refuses a change or delete of `link` when it is on a domain barred from the caller. */
export function refuseReservedLinkWrite(config: Config, caller: Caller, link: { domain: string }): void {
  if (domainsBarredFrom(config, caller).includes(link.domain)) throw reservedLinkUnchangeable(link.domain)
}

/** The short domains of this service among `hosts`: reserved ones and any workspace's. */
export async function shortDomainsAmong(prisma: PrismaClient, config: Config, hosts: string[]): Promise<Set<string>> {
  const found = new Set(hosts.filter((host) => config.reservedDomains.includes(host)))
  const rest = hosts.filter((host) => !found.has(host))
  if (rest.length === 0) return found
  const owners = await caches(prisma).owners.getMany(rest, async (missing) => {
    const rows = await prisma.domain.findMany({ where: { host: { in: missing } }, select: { host: true, workspaceId: true } })
    const byHost = new Map<string, number | null>(missing.map((host) => [host, null]))
    for (const row of rows) byHost.set(row.host, row.workspaceId)
    return byHost
  })
  for (const [host, owner] of owners) if (owner !== null) found.add(host)
  return found
}
