import type { Config } from '../config/config.js'
import type { PrismaClient } from '../db/database.js'
import { addDomain, createToken } from './workspace-repository.js'

export const DEV_WORKSPACE = 'default'
export const DEV_DOMAIN = 'go.localhost'

/**
 * The embedded database can be opened by one process at a time, so the command line cannot mint a token
 * while the server runs. On the first start of an empty embedded database the server therefore creates a
 * workspace with its own domain and one token, and returns the token to be shown once, and the domain (null
 * when RESERVED_DOMAINS holds it: a workspace cannot own a reserved domain).
 */
export async function bootstrapEmbedded(prisma: PrismaClient, config: Config): Promise<{ token: string; domain: string | null } | undefined> {
  if ((await prisma.workspace.count()) > 0) return undefined
  const { token } = await createToken(prisma, { workspace: DEV_WORKSPACE, label: 'development (first start)' })
  if (config.reservedDomains.includes(DEV_DOMAIN)) return { token, domain: null }
  await addDomain(prisma, { workspace: DEV_WORKSPACE, host: DEV_DOMAIN, isDefault: true, reservedDomains: config.reservedDomains })
  return { token, domain: DEV_DOMAIN }
}
