/**
 * Every test file builds the real app on a database of its own: a fresh PostgreSQL database on the
 * server named by DATABASE_URL (dropped afterwards), or an in-memory PGlite when it is unset. Files can
 * therefore run side by side without seeing each other's data.
 */
import type { FastifyInstance, FastifyServerOptions, LightMyRequestResponse } from 'fastify'
import { appendFileSync, mkdirSync } from 'node:fs'
import { dirname, relative } from 'node:path'
import { randomBytes } from 'node:crypto'
import { isIP } from 'node:net'
import { buildApp, type AppOptions } from '../../src/app.js'
import { isLoopbackAddress } from '../../src/autofill/address-policy.js'
import type { LookupFunction } from '../../src/autofill/guarded-agent.js'
import { loadConfig, type Config } from '../../src/config/config.js'
import type { AutofillPluginOptions } from '../../src/plugins/autofill.js'
import { openDatabase, type Database } from '../../src/db/database.js'
import { addDomain, createToken } from '../../src/workspaces/workspace-repository.js'
import { createScratchDatabase } from './scratch-database.js'

export const DEFAULT_DOMAIN = 'short.test'
export const OFFICIAL_DOMAIN = 'official.test'

export interface Teardown {
  teardown(fn: () => unknown): void
}

/**
 * The suite's configuration. Overload protection is off unless a test turns it on (test/ops/overload.test.ts):
 * on the shared CI machine, with the embedded database running on the event loop, a loop held for a second
 * or hundreds of concurrent writers queueing for the pool are the tests' own doing, and they assert on answers
 * that a 503 for load would replace.
 */
export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({
    DEFAULT_DOMAIN,
    RESERVED_DOMAINS: `${DEFAULT_DOMAIN},${OFFICIAL_DOMAIN}`,
    LOG_LEVEL: 'silent',
    OVERLOAD_EVENT_LOOP_DELAY_MS: '0',
    OVERLOAD_DB_POOL_WAITING: '0',
    ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
    ...env,
  })
}

/** A database of the test's own, migrated, closed (and dropped) when the test ends. */
export async function openTestDatabase(t: Teardown): Promise<{ database: Database; url?: string }> {
  const serverUrl = process.env.DATABASE_URL
  if (!serverUrl) {
    const database = await openDatabase({ dataDir: 'memory://' })
    t.teardown(() => database.close())
    return { database }
  }
  const { url, drop } = await createScratchDatabase(serverUrl, `test_${process.pid}`)
  const database = await openDatabase({ databaseUrl: url, dataDir: 'unused' })
  t.teardown(async () => {
    await database.close()
    await drop()
  })
  return { database, url }
}

export interface TestApp {
  app: FastifyInstance
  database: Database
  prisma: Database['prisma']
  config: Config
}

/**
 * Host names the tests' resolver knows: `localhost` and what a test adds. Every other name fails at once
 * (ENOTFOUND), so no test ever sends a DNS query or a request beyond this machine.
 */
export function testLookup(names: Record<string, string[]> = {}): LookupFunction {
  const known: Record<string, string[]> = { localhost: ['127.0.0.1', '::1'], ...names }
  return (hostname, options, callback) => {
    const addresses = known[hostname.toLowerCase()]
    if (!addresses) {
      const error: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`)
      error.code = 'ENOTFOUND'
      return process.nextTick(callback, error, '')
    }
    const all = addresses.map((address) => ({ address, family: isIP(address) }))
    if (options.all) process.nextTick(callback, null, all)
    else process.nextTick(callback, null, all[0].address, all[0].family)
  }
}

/**
 * The test suite's autofill: the resolver above, and on top of the configured address policy a second
 * one that lets nothing but loopback through (whatever AUTOFILL_ALLOW_PRIVATE says). The SSRF tests
 * lift that second policy to test the real one, against loopback targets only.
 */
export const testAutofill = (): AutofillPluginOptions => ({
  lookup: testLookup(),
  restrictAddress: isLoopbackAddress,
  keyPrefix: `test-${randomBytes(4).toString('hex')}:`,
})

/**
 * Where every app of the suite built without a logger of its own writes its lines at level error (50) and
 * above: the service logs every 500 there, so a line means a fault no test asked for. `npm test` empties the
 * file first and fails when it holds anything afterwards (test/support/check-server-log.ts). A test that
 * provokes a 500 on purpose passes a logger of its own.
 */
export const SERVER_ERROR_LOG = 'test-artifacts/server-errors.ndjson'

function unexpectedErrorLogger(): FastifyServerOptions['logger'] {
  mkdirSync(dirname(SERVER_ERROR_LOG), { recursive: true })
  const testFile = relative(process.cwd(), process.argv[1] ?? 'unknown')
  return {
    level: 'error',
    stream: { write: (line: string) => appendFileSync(SERVER_ERROR_LOG, JSON.stringify({ testFile, ...JSON.parse(line) }) + '\n') },
  }
}

export async function buildTestApp(
  t: Teardown,
  options: { env?: Record<string, string>; database?: Database } & Partial<Omit<AppOptions, 'config' | 'database'>> = {},
): Promise<TestApp> {
  // A second app on the database of a first (several instances of the service) is given that database.
  const database = options.database ?? (await openTestDatabase(t)).database
  const config = testConfig(options.env)
  const autofill = { ...testAutofill(), ...options.autofill }
  const logger = options.logger ?? unexpectedErrorLogger()
  const app = await buildApp({ ...options, autofill, config, database, logger })
  t.teardown(() => app.close())
  return { app, database, prisma: database.prisma, config }
}

/** A workspace with a token (and, optionally, domains of its own); returns the token. */
export async function createWorkspaceToken(
  prisma: Database['prisma'],
  options: { workspace: string; official?: boolean; domains?: string[]; defaultDomain?: string },
): Promise<string> {
  const { token } = await createToken(prisma, { workspace: options.workspace, official: options.official })
  const reserved = [DEFAULT_DOMAIN, OFFICIAL_DOMAIN]
  for (const host of options.domains ?? []) {
    await addDomain(prisma, { workspace: options.workspace, host, reservedDomains: reserved })
  }
  if (options.defaultDomain) {
    await addDomain(prisma, { workspace: options.workspace, host: options.defaultDomain, isDefault: true, reservedDomains: reserved })
  }
  return token
}

/** JSON requests with a token, the way API clients send them. */
export function client(app: FastifyInstance, token: string) {
  const send = (method: 'POST' | 'PUT', url: string, body: unknown, headers: Record<string, string> = {}) =>
    app.inject({
      method,
      url,
      headers: { 'api-authorization': token, 'content-type': 'application/json', ...headers },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    })
  return {
    create: (link: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      send('POST', '/v1/links/create', { link, ...extra }),
    update: (uniq: number | string, link: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      send('PUT', `/v1/links/${uniq}`, { link, ...extra }),
    updateByDomain: (domain: string, id: string, link: Record<string, unknown>) =>
      send('PUT', `/v1/links/by-domain/${encodeURIComponent(domain)}/${encodeURIComponent(id)}`, { link }),
    send,
  }
}

export function json<T = Record<string, any>>(response: LightMyRequestResponse): T {
  return response.json() as T
}
