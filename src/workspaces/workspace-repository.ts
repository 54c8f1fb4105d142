import { DISPLAY_PREFIX_LENGTH, displayPrefix, generateToken, hashToken } from '../auth/tokens.js'
import { isIPv4Address, normalizeHost } from '../config/config.js'
import type { PrismaClient } from '../db/database.js'
import { isUniqueViolation } from '../db/errors.js'
import { domainsChanged, tokensChanged } from '../cache/change-notices.js'
import { FOLDER_NAME_MAX } from '../../schemas/folder.js'
import { codePointLength } from '../../schemas/formats.js'
import { SCRIPT_NAME_MAX } from '../../schemas/script.js'
import { CONTROL_CHARACTERS } from './names.js'

/** Errors of administrative operations (the command line), said plainly to an operator. */
export class AdminError extends Error {
  override name = 'AdminError'
}

export async function findWorkspace(prisma: PrismaClient, name: string) {
  const workspace = await prisma.workspace.findUnique({ where: { name } })
  if (!workspace) {
    throw new AdminError(`No workspace named "${name}": create it first with workspace:create ${name} (or token:create --workspace ${name})`)
  }
  return workspace
}

/** Workspaces exist for the command line only; their names are printed one per line, tab-separated. */
export const WORKSPACE_NAME_MAX = 100

/**
 * A name as the command line takes it: trimmed, 1 to `max` characters as the API counts them (an emoji is one),
 * so that what the command line makes, the API could have made (folders, scripts).
 */
function checkedName(what: string, name: string, max: number): string {
  const trimmed = name.trim()
  if (!trimmed) throw new AdminError(`A ${what} needs a name`)
  if (codePointLength(trimmed) > max) throw new AdminError(`A ${what} name may have at most ${max} characters`)
  if (CONTROL_CHARACTERS.test(trimmed)) throw new AdminError(`A ${what} name may not hold control characters (a line break, a tab)`)
  return trimmed
}

const workspaceName = (name: string) => checkedName('workspace', name, WORKSPACE_NAME_MAX)

export async function createWorkspace(prisma: PrismaClient, name: string) {
  const trimmed = workspaceName(name)
  const exists = () => new AdminError(`A workspace named "${trimmed}" already exists`)
  if (await prisma.workspace.findUnique({ where: { name: trimmed } })) throw exists()
  // Another command may create it between the two statements.
  return prisma.workspace.create({ data: { name: trimmed } }).catch((error: unknown) => {
    throw isUniqueViolation(error) ? exists() : error
  })
}

/** Creates a token for the named workspace, creating the workspace when it does not exist yet. */
export async function createToken(
  prisma: PrismaClient,
  options: { workspace: string; official?: boolean; label?: string },
): Promise<{ token: string; workspaceId: number }> {
  const name = workspaceName(options.workspace)
  // Two commands creating the same new workspace at once: the upsert of the second fails on the name, and once
  // more finds the workspace the first created.
  const upsert = () => prisma.workspace.upsert({ where: { name }, create: { name }, update: {} })
  const workspace = await upsert().catch((error: unknown) => {
    if (isUniqueViolation(error)) return upsert()
    throw error
  })
  const token = generateToken()
  await prisma.apiToken.create({
    data: {
      workspaceId: workspace.id,
      hash: hashToken(token),
      prefix: displayPrefix(token),
      label: options.label ?? null,
      official: options.official ?? false,
    },
  })
  return { token, workspaceId: workspace.id }
}

/**
 * Revokes by the whole token or by its display prefix (which must name exactly one live token, or else exactly one
 * revoked one). Revoking a revoked token changes nothing and succeeds, by either form: a retried revoke is not an
 * error.
 */
export async function revokeToken(prisma: PrismaClient, tokenOrPrefix: string): Promise<string> {
  const text = tokenOrPrefix.trim()
  if (text.length < 6) throw new AdminError('Give the token or its prefix (at least 6 characters)')
  const byHash = await prisma.apiToken.findUnique({ where: { hash: hashToken(text) } })
  // Prisma's startsWith is a SQL LIKE, where "_" (a token character) is a wildcard: narrow in SQL, decide here.
  const matching = byHash
    ? [byHash]
    : (await prisma.apiToken.findMany({ where: { prefix: { startsWith: text.slice(0, DISPLAY_PREFIX_LENGTH) } } })).filter((token) =>
        token.prefix.startsWith(text),
      )
  const live = matching.filter((token) => !token.revokedAt)
  const candidates = live.length > 0 ? live : matching
  if (candidates.length === 0 && text.length > DISPLAY_PREFIX_LENGTH) {
    // Only the first characters of a token are kept; more of them cannot be checked, short of the whole token.
    throw new AdminError(
      `No token is "${text}": give the whole token, or its prefix of ${DISPLAY_PREFIX_LENGTH} characters as token:list shows it`,
    )
  }
  if (candidates.length === 0) throw new AdminError(`No token matches "${text}"`)
  if (candidates.length > 1) throw new AdminError(`"${text}" matches ${candidates.length} tokens; give more of it`)
  const [token] = candidates
  if (!token.revokedAt) await prisma.apiToken.update({ where: { id: token.id }, data: { revokedAt: new Date() } })
  // Refused at once by the apps of this process; other processes' caches expire within CACHE_TTL_MS.
  tokensChanged()
  return token.prefix
}

export async function listTokens(prisma: PrismaClient, workspaceName: string) {
  const workspace = await findWorkspace(prisma, workspaceName)
  return prisma.apiToken.findMany({
    where: { workspaceId: workspace.id },
    orderBy: { id: 'asc' },
    select: { prefix: true, label: true, official: true, createdAt: true, revokedAt: true },
  })
}

export async function addDomain(
  prisma: PrismaClient,
  options: { workspace: string; host: string; isDefault?: boolean; reservedDomains: string[] },
) {
  const host = normalizeHost(options.host)
  if (!host) throw new AdminError(`"${options.host}" is not a valid host name`)
  // A short domain is what visitors read on a link: a name, which DNS can move, not an address.
  if (isIPv4Address(host)) throw new AdminError(`${host} is an IP address; a short domain is a host name`)
  if (options.reservedDomains.includes(host)) {
    throw new AdminError(`${host} is one of the service's reserved domains (RESERVED_DOMAINS)`)
  }
  const workspace = await findWorkspace(prisma, options.workspace)
  const existing = await prisma.domain.findUnique({ where: { host } })
  if (existing && existing.workspaceId !== workspace.id) throw new AdminError(`${host} belongs to another workspace`)
  const add = () =>
    prisma.$transaction(async (tx) => {
      if (options.isDefault) {
        // One default per workspace: two adds with --default take turns on the workspace's row (the update below
        // finds no row to lock while the workspace has no default yet).
        await tx.$queryRaw`SELECT 1 FROM "Workspace" WHERE "id" = ${workspace.id} FOR UPDATE`
        await tx.domain.updateMany({ where: { workspaceId: workspace.id, isDefault: true }, data: { isDefault: false } })
      }
      const stored = await tx.domain.upsert({
        where: { host },
        create: { host, workspaceId: workspace.id, isDefault: options.isDefault ?? false },
        update: options.isDefault ? { isDefault: true } : {},
      })
      // Another workspace added it since the check above: nothing of this is kept (its default stays as it was).
      if (stored.workspaceId !== workspace.id) throw new AdminError(`${host} belongs to another workspace`)
      return stored
    })
  // An upsert with nothing to update reads, then inserts: another command inserting the host in between makes it
  // fail on the key. Once more, it finds that row and says whose it is.
  const domain = await add().catch((error: unknown) => {
    if (isUniqueViolation(error)) return add()
    throw error
  })
  domainsChanged()
  return domain
}

export async function createFolder(prisma: PrismaClient, options: { workspace: string; name: string }) {
  const name = checkedName('folder', options.name, FOLDER_NAME_MAX)
  const workspace = await findWorkspace(prisma, options.workspace)
  const existing = await prisma.folder.findUnique({ where: { workspaceId_name: { workspaceId: workspace.id, name } } })
  if (existing) throw new AdminError(`The workspace already has a folder named "${name}" (id ${existing.id})`)
  return prisma.folder.create({ data: { workspaceId: workspace.id, name } }).catch((error: unknown) => {
    throw isUniqueViolation(error) ? new AdminError(`The workspace already has a folder named "${name}"`) : error
  })
}

export const MAX_SCRIPT_BYTES = 64 * 1024

export async function createScript(prisma: PrismaClient, options: { workspace: string; name: string; content: string }) {
  const name = checkedName('script', options.name, SCRIPT_NAME_MAX)
  if (Buffer.byteLength(options.content) > MAX_SCRIPT_BYTES) throw new AdminError('A script may hold at most 64 KiB')
  const workspace = await findWorkspace(prisma, options.workspace)
  return prisma.script.create({ data: { workspaceId: workspace.id, name, content: options.content } })
}

export async function setLimits(
  prisma: PrismaClient,
  options: { workspace: string; hour?: number; day?: number },
) {
  for (const [flag, value] of Object.entries({ hour: options.hour, day: options.day })) {
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 0 || value > 2_147_483_647)) {
      throw new AdminError(`--${flag} must be a whole number from 0 to 2147483647`)
    }
  }
  if (options.hour === undefined && options.day === undefined) throw new AdminError('Give --hour N, --day N or both')
  const workspace = await findWorkspace(prisma, options.workspace)
  return prisma.workspace.update({
    where: { id: workspace.id },
    data: { hourLimit: options.hour ?? workspace.hourLimit, dayLimit: options.day ?? workspace.dayLimit },
  })
}

/** Quotas of a workspace that has none of its own (contract section 8), for create and update alike. */
export const DEFAULT_LIMITS = { hour: 1000, day: 10_000 } as const

/** The quotas that apply to a workspace: its own, or the defaults where it has none. */
export function effectiveLimits(workspace: { hourLimit: number | null; dayLimit: number | null }) {
  return { hour: workspace.hourLimit ?? DEFAULT_LIMITS.hour, day: workspace.dayLimit ?? DEFAULT_LIMITS.day }
}

/** The quotas of a workspace by id, read afresh (limits:set applies to the next request, no restart). */
export async function workspaceLimits(prisma: PrismaClient, workspaceId: number) {
  const workspace = await prisma.workspace.findUnique({ where: { id: workspaceId }, select: { hourLimit: true, dayLimit: true } })
  return effectiveLimits(workspace ?? { hourLimit: null, dayLimit: null })
}
