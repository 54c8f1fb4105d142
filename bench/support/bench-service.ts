/**
 * What the service processes of the load benchmarks share (bench/api-server.ts, bench/redirect-server.ts,
 * bench/soak-server.ts): the service's configuration for a benchmark, and a workspace of links to visit, read
 * and update, inserted in one statement.
 */
import { randomBytes } from 'node:crypto'
import { loadConfig, type Config } from '../../src/config/config.js'
import type { Database } from '../../src/db/database.js'
import { addDomain, createToken, setLimits } from '../../src/workspaces/workspace-repository.js'

/** The service's configuration in a benchmark: DATABASE_URL and REDIS_URL from the environment when set. */
export function benchConfig(env: Record<string, string> = {}): Config {
  const { DATABASE_URL: databaseUrl, REDIS_URL: redisUrl } = process.env
  return loadConfig({
    DEFAULT_DOMAIN: 'short.bench',
    RESERVED_DOMAINS: 'short.bench',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    COOKIE_SECRET: randomBytes(32).toString('base64url'),
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
    ...env,
  })
}

/**
 * A workspace `name` with a token and `domain` (its default one when `isDefault`), and `count` links
 * `<domain>/l1` … `/l<count>` to https://example.com/landing/<n>; with `unlimited`, quotas too large to be reached.
 */
export async function seedWorkspace(
  database: Database,
  options: { name: string; domain: string; count: number; isDefault?: boolean; unlimited?: boolean },
): Promise<{ token: string; workspaceId: number; firstLink: number }> {
  const { prisma } = database
  const { token, workspaceId } = await createToken(prisma, { workspace: options.name })
  await addDomain(prisma, { workspace: options.name, host: options.domain, isDefault: options.isDefault, reservedDomains: ['short.bench'] })
  if (options.unlimited) await setLimits(prisma, { workspace: options.name, hour: 2_000_000_000, day: 2_000_000_000 })
  await prisma.$executeRawUnsafe(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt")
     SELECT $1, $2, 'l' || g, 'l' || g, 'https://example.com/landing/' || g, now() FROM generate_series(1, ${options.count}) g`,
    workspaceId,
    options.domain,
  )
  await prisma.$executeRawUnsafe('ANALYZE "Link"')
  const [{ first }] = await prisma.$queryRawUnsafe<{ first: number }[]>('SELECT min("uniq") AS first FROM "Link" WHERE "domain" = $1', options.domain)
  return { token, workspaceId, firstLink: first }
}
