import { Type, type Static } from '@sinclair/typebox'
import { parse as parseDotenv } from 'dotenv'
import envSchema from 'env-schema'
import ipaddr from 'ipaddr.js'
import { readFileSync } from 'node:fs'
import { domainToASCII } from 'node:url'
import { redisDatabaseIndex } from '../redis/database-index.js'

/** The environment the service reads, with defaults; `.env.example` explains each variable. */
const EnvSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  PUBLIC_URL: Type.Optional(Type.String({ minLength: 1 })),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  DATA_DIR: Type.String({ minLength: 1, default: './data' }),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  REDIS_KEY_PREFIX: Type.String({ pattern: '^[A-Za-z0-9:._-]*$', maxLength: 64, default: '' }),
  DEFAULT_DOMAIN: Type.String({ minLength: 1, default: 'short.localhost' }),
  RESERVED_DOMAINS: Type.String({ minLength: 1, default: 'short.localhost,links.localhost' }),
  LOG_LEVEL: Type.Unsafe<string>({
    type: 'string',
    enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    default: 'info',
  }),
  TRUST_PROXY: Type.String({ default: 'false' }),
  // An HTTP header name (RFC 9110 token): a space or colon would name a header no request can carry.
  COUNTRY_HEADER: Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$", default: 'cf-ipcountry' }),
  AUTOFILL_TIMEOUT_MS: Type.Integer({ minimum: 1, maximum: 60000, default: 3000 }),
  AUTOFILL_MAX_BYTES: Type.Integer({ minimum: 1024, maximum: 52428800, default: 1048576 }),
  AUTOFILL_ALLOW_PRIVATE: Type.Boolean({ default: false }),
  RATE_LIMIT_ON_REDIS_ERROR: Type.Unsafe<'allow' | 'deny'>({ type: 'string', enum: ['allow', 'deny'], default: 'allow' }),
  COOKIE_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  VISIT_RETENTION_DAYS: Type.Integer({ minimum: 1, maximum: 36500, default: 400 }),
  // Sent as `Authorization: Bearer <token>`, which ends at a space: a token with one could never be sent.
  METRICS_TOKEN: Type.Optional(Type.String({ minLength: 16, pattern: '^\\S+$' })),
  OVERLOAD_EVENT_LOOP_DELAY_MS: Type.Integer({ minimum: 0, maximum: 60000, default: 1000 }),
  OVERLOAD_DB_POOL_WAITING: Type.Integer({ minimum: 0, maximum: 1000000, default: 100 }),
})

type Env = Static<typeof EnvSchema>

export interface Config {
  port: number
  host: string
  /** Where clients reach the API (the OpenAPI document's `servers`): no trailing slash, no query. */
  publicUrl: string
  /** PostgreSQL connection string; undefined means the embedded PGlite database in `dataDir`. */
  databaseUrl?: string
  dataDir: string
  redisUrl?: string
  /**
   * Put before every Redis key and the change channel's name: several deployments (staging and production, or
   * test runs) can share one Redis. No braces, so the keys' own hash tags ({ws:N}) still decide the Cluster slot.
   */
  redisKeyPrefix: string
  defaultDomain: string
  reservedDomains: string[]
  logLevel: string
  trustProxy: boolean | number | string[]
  countryHeader: string
  autofill: { timeoutMs: number; maxBytes: number; allowPrivate: boolean }
  rateLimitOnRedisError: 'allow' | 'deny'
  /** Key of the password cookies' signatures; undefined: a random key of this process (src/redirects/password-cookie.ts). */
  cookieSecret?: string
  /** Raw visits and their hourly aggregates older than this are dropped (src/analytics/partitions.ts). */
  visitRetentionDays: number
  /** When set, GET /metrics requires `Authorization: Bearer <metricsToken>` (src/plugins/metrics.ts). */
  metricsToken?: string
  /**
   * Overload protection (src/plugins/overload.ts): requests are refused with 503 while the event loop's mean
   * delay passes `eventLoopDelayMs`, or while more than `dbPoolWaiting` queries wait for a connection of the
   * main database pool. 0 turns a check off.
   */
  overload: { eventLoopDelayMs: number; dbPoolWaiting: number }
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

interface EnvSchemaError {
  instancePath: string
  message?: string
  params: { allowedValues?: unknown[] }
}

/** "PORT must be integer; LOG_LEVEL must be one of: fatal, error, …" */
function describeEnvErrors(error: Error & { errors?: EnvSchemaError[] }): string {
  if (!error.errors) return error.message
  return error.errors
    .map((e) => {
      const variable = e.instancePath.replace(/^\//, '')
      return e.params.allowedValues
        ? `${variable} must be one of: ${e.params.allowedValues.join(', ')}`
        : `${variable} ${e.message}`
    })
    .join('; ')
}

/**
 * Lower-case ASCII (punycode) form of a host name, or undefined when it is not a valid host name. An IPv4 address
 * passes only as written in the usual dotted form: URL parsers read other forms as addresses too ("1.2.3" as
 * 1.2.0.3, "2130706433" or "１２７.０.０.１" as 127.0.0.1), which would be stored as another text than the one typed.
 */
export function normalizeHost(input: string): string | undefined {
  // domainToASCII reads a URL's host: it would cut "go.brand.com/x" or "go.brand.com?x" down to go.brand.com.
  if (/[/?#\\@%\s]/.test(input.trim())) return undefined
  const typed = input.trim().toLowerCase().replace(/\.$/, '')
  const ascii = domainToASCII(typed)
  if (isIPv4Address(ascii) && ascii !== typed) return undefined
  if (!ascii || ascii.length > 253 || !/^[a-z0-9-]+(\.[a-z0-9-]+)*$/.test(ascii)) return undefined
  if (ascii.split('.').some((label) => label.length > 63 || label.startsWith('-') || label.endsWith('-'))) return undefined
  return ascii
}

/** A host that URL parsers read as an IPv4 address (its last label a number), in its dotted form. */
export const isIPv4Address = (host: string) => /^\d+\.\d+\.\d+\.\d+$/.test(host)

function parseHost(variable: string, value: string): string {
  const host = normalizeHost(value)
  if (!host) throw new ConfigError(`${variable}: "${value}" is not a valid host name`)
  return host
}

function parseTrustProxy(value: string): Config['trustProxy'] {
  const text = value.trim().toLowerCase()
  if (text === 'true') return true
  if (text === 'false' || text === '') return false
  if (/^\d+$/.test(text)) return Number(text)
  const entries = text.split(',').map((entry) => entry.trim()).filter(Boolean)
  // The same parser as Fastify's (proxy-addr uses ipaddr.js), so what passes here does not fail at start.
  const isAddressOrRange = (entry: string) => /^[0-9a-f.:]+(\/\d+)?$/.test(entry) && (ipaddr.isValid(entry) || ipaddr.isValidCIDR(entry))
  if (entries.every(isAddressOrRange)) return entries
  throw new ConfigError(`TRUST_PROXY: "${value}" must be true, false, a hop count or a comma-separated list of addresses or CIDR ranges`)
}

/** A connection string that the drivers can read; its text is not repeated, as it may hold a password. */
function checkConnectionUrl(variable: string, value: string | undefined): void {
  if (value === undefined) return
  try {
    new URL(value)
  } catch {
    throw new ConfigError(`${variable} is not a valid URL (scheme://[user[:password]@]host[:port][/path])`)
  }
}

/**
 * PUBLIC_URL as an origin with an optional base path (`https://api.brand.com`, `https://brand.com/links`);
 * unset: the listen address, with a wildcard host (0.0.0.0, ::) shown as localhost, which is where a client
 * on the same machine reaches it.
 */
function parsePublicUrl(value: string | undefined, host: string, port: number): string {
  if (value === undefined) {
    const shown = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host
    return `http://${shown}:${port}`
  }
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new ConfigError(`PUBLIC_URL: "${value}" is not an absolute URL`)
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash || url.username || url.password) {
    // Not repeated when it holds credentials: the start's messages never show a password.
    const shown = url.username || url.password ? '' : ` "${value}"`
    throw new ConfigError(`PUBLIC_URL${shown} must be an http(s) URL without credentials, query or fragment`)
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`
}

/** The variables of a `.env` file, if there is one; the environment's own values win over them. */
function readDotenv(path: string): Record<string, string> {
  try {
    return parseDotenv(readFileSync(path))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw new ConfigError(`Cannot read ${path}: ${(error as Error).message}`)
  }
}

const INTEGER_VARIABLES = Object.entries(EnvSchema.properties)
  .filter(([, schema]) => schema.type === 'integer')
  .map(([name]) => name)

/**
 * Reads and validates the configuration; throws ConfigError naming the variable at fault. The process's own
 * environment reads `.env` too (`dotenv` names another file, for tests).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: { dotenv?: string } = {}): Config {
  const dotenvPath = options.dotenv ?? (env === process.env ? '.env' : undefined)
  const merged = { ...(dotenvPath ? readDotenv(dotenvPath) : {}), ...env }
  // Empty and blank variables count as unset, as they do in most deployment tools, in `.env` as in the environment
  // (where `VAR=` also overrides a value of `.env`). White space around a value is no part of it (a space left after
  // `LOG_LEVEL=debug ` in a file), for every variable alike.
  const data = Object.fromEntries(
    Object.entries(merged)
      .map(([name, value]) => [name, value?.trim()])
      .filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ''),
  )
  // Numbers in decimal digits only: the schema's coercion would read 0x0BB9 or 1e3 as well.
  for (const name of INTEGER_VARIABLES) {
    if (data[name] !== undefined && !/^-?\d+$/.test(data[name])) throw new ConfigError(`Invalid configuration: ${name} must be a whole number`)
  }
  let parsed: Env
  try {
    parsed = envSchema<Env>({ schema: EnvSchema, data, env: false, dotenv: false })
  } catch (error) {
    throw new ConfigError(`Invalid configuration: ${describeEnvErrors(error as Error)}`)
  }
  checkConnectionUrl('DATABASE_URL', parsed.DATABASE_URL)
  checkConnectionUrl('REDIS_URL', parsed.REDIS_URL)
  // ioredis reads the database index (the path, else ?db=) with parseInt and, should SELECT fail, goes on in database 0.
  if (parsed.REDIS_URL !== undefined && !/^\d{0,5}$/.test(redisDatabaseIndex(parsed.REDIS_URL))) {
    throw new ConfigError('REDIS_URL: the database index (the path, or ?db=) must be a whole number (redis://host:6379/2), or nothing')
  }

  const defaultDomain = parseHost('DEFAULT_DOMAIN', parsed.DEFAULT_DOMAIN)
  const reservedDomains = parsed.RESERVED_DOMAINS.split(',')
    .filter((entry) => entry.trim() !== '')
    .map((entry) => parseHost('RESERVED_DOMAINS', entry))
  if (!reservedDomains.includes(defaultDomain)) {
    throw new ConfigError(`RESERVED_DOMAINS must include DEFAULT_DOMAIN (${defaultDomain})`)
  }

  return {
    port: parsed.PORT,
    host: parsed.HOST,
    publicUrl: parsePublicUrl(parsed.PUBLIC_URL, parsed.HOST, parsed.PORT),
    databaseUrl: parsed.DATABASE_URL,
    dataDir: parsed.DATA_DIR,
    redisUrl: parsed.REDIS_URL,
    redisKeyPrefix: parsed.REDIS_KEY_PREFIX,
    defaultDomain,
    reservedDomains: [...new Set(reservedDomains)],
    logLevel: parsed.LOG_LEVEL,
    trustProxy: parseTrustProxy(parsed.TRUST_PROXY),
    countryHeader: parsed.COUNTRY_HEADER.toLowerCase(),
    autofill: {
      timeoutMs: parsed.AUTOFILL_TIMEOUT_MS,
      maxBytes: parsed.AUTOFILL_MAX_BYTES,
      allowPrivate: parsed.AUTOFILL_ALLOW_PRIVATE,
    },
    rateLimitOnRedisError: parsed.RATE_LIMIT_ON_REDIS_ERROR,
    cookieSecret: parsed.COOKIE_SECRET,
    visitRetentionDays: parsed.VISIT_RETENTION_DAYS,
    metricsToken: parsed.METRICS_TOKEN,
    overload: { eventLoopDelayMs: parsed.OVERLOAD_EVENT_LOOP_DELAY_MS, dbPoolWaiting: parsed.OVERLOAD_DB_POOL_WAITING },
  }
}
