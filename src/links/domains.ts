import type { Config } from '../config/config.js'
import { normalizeHost } from '../config/config.js'
import type { PrismaClient } from '../db/database.js'
import { domainNotAllowed, domainReserved, fieldError } from '../errors/app-error.js'
import type { Caller } from '../plugins/auth.js'

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
    const workspaceDefault = await prisma.domain.findFirst({
      where: { workspaceId: caller.workspaceId, isDefault: true },
      select: { host: true },
    })
    host = workspaceDefault?.host ?? config.defaultDomain
  } else {
    const normalized = normalizeHost(requested)
    if (!normalized) throw fieldError('/link/domain', 'must be a valid host name')
    host = normalized
  }

  if (config.reservedDomains.includes(host)) {
    if (!caller.official) throw domainReserved(host)
    return host
  }
  const owned = await prisma.domain.findUnique({ where: { host }, select: { workspaceId: true } })
  if (owned?.workspaceId !== caller.workspaceId) throw domainNotAllowed(host)
  return host
}

/** The short domains of this service among `hosts`: reserved ones and any workspace's. */
export async function shortDomainsAmong(prisma: PrismaClient, config: Config, hosts: string[]): Promise<Set<string>> {
  const found = new Set(hosts.filter((host) => config.reservedDomains.includes(host)))
  const rest = hosts.filter((host) => !found.has(host))
  if (rest.length > 0) {
    const rows = await prisma.domain.findMany({ where: { host: { in: rest } }, select: { host: true } })
    for (const row of rows) found.add(row.host)
  }
  return found
}
