/**
 * What the quota limiter adds to a request (`npm run bench:rate-limit`, or `npx tsx bench/rate-limit.ts`).
 *
 * One database (PostgreSQL from DATABASE_URL, else an in-memory PGlite), several instances of the app on
 * it: limiter off, limiter with a store that does nothing (the hooks and the quota lookup alone), the
 * in-process store, and Redis (REDIS_URL, default redis://127.0.0.1:6379). Each sends the same update of
 * one link through app.inject, the variants taking turns request by request so that drift affects all
 * alike, with quotas too large to be reached. Prints median and p99 latency per variant, the difference to "off", and the Redis
 * round trips per request (counted on the client, and by Redis in INFO commandstats).
 *
 * Options (environment): BENCH_REQUESTS (per variant, default 3000).
 */
import type { FastifyInstance } from 'fastify'
import { performance } from 'node:perf_hooks'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { buildApp } from '../src/app.js'
import { LIMITS_CACHE_MS } from '../src/plugins/rate-limits.js'
import { loadConfig } from '../src/config/config.js'
import { openTestDatabase } from '../test/support/test-app.js'
import { MemoryQuotaStore } from '../src/rate-limits/memory-store.js'
import { toDecision, type QuotaStore } from '../src/rate-limits/quota-store.js'
import { RedisQuotaStore } from '../src/rate-limits/redis-store.js'
import { createRedisClient, firstConnection } from '../src/redis/redis-client.js'
import { addDomain, createToken, setLimits } from '../src/workspaces/workspace-repository.js'

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 3000)
const WARM_UP = 300
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379'
const databaseUrl = process.env.DATABASE_URL

const config = loadConfig({
  DEFAULT_DOMAIN: 'short.bench',
  RESERVED_DOMAINS: 'short.bench',
  LOG_LEVEL: 'silent',
  ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
})

/** Hooks and quota lookup, no counting: what is left of the limiter without its store. */
const nothingStore: QuotaStore = {
  reserve: async (subject, limits, now) =>
    toDecision(subject, limits, now, ['bench'], [0, 0].map(() => ({ used: 1, freeAt: now + 3_600_000 }))),
  peek: async (subject, limits, now) => toDecision(subject, limits, now, [], [0, 0].map(() => ({ used: 0, freeAt: 0 }))),
  refund: async () => {},
  close: async () => {},
}

/** A Redis client that counts the commands it sends. */
function countingRedis() {
  const redis = createRedisClient(redisUrl)
  const counter = { commands: 0 }
  const send = redis.sendCommand.bind(redis)
  redis.sendCommand = ((...args: Parameters<typeof send>) => {
    counter.commands++
    return send(...args)
  }) as typeof redis.sendCommand
  return { redis, counter }
}

async function scriptCalls(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats')
  let calls = 0
  for (const match of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(match[2])
  return calls
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
const ms = (value: number) => value.toFixed(3).padStart(8)

async function main() {
  // A database of the run's own (created on the DATABASE_URL server and dropped afterwards, or in memory).
  const teardowns: (() => unknown)[] = []
  const { database } = await openTestDatabase({ teardown: (fn) => teardowns.unshift(fn) })
  const suffix = randomBytes(3).toString('hex')
  const workspace = `bench-${suffix}`
  const { token } = await createToken(database.prisma, { workspace })
  await addDomain(database.prisma, { workspace, host: `go.${suffix}.bench`, isDefault: true, reservedDomains: ['short.bench'] })
  await setLimits(database.prisma, { workspace, hour: 2_000_000_000, day: 2_000_000_000 })

  const { redis, counter } = countingRedis()
  const admin = new Redis(redisUrl, { maxRetriesPerRequest: 0 })
  if (!(await firstConnection(redis, 2000))) throw new Error(`Redis at ${redisUrl} does not answer`)
  const keyPrefix = `bench-${suffix}:`

  const variants: { name: string; app: FastifyInstance; times: number[] }[] = []
  const build = async (name: string, rateLimits: Parameters<typeof buildApp>[0]['rateLimits']) => {
    const app = await buildApp({ config, database, logger: false, rateLimits })
    variants.push({ name, app, times: [] })
  }
  await build('off', { enabled: false })
  await build('no-op store', { store: nothingStore })
  await build('in-process', { store: new MemoryQuotaStore() })
  await build('redis', { store: new RedisQuotaStore(redis, { keyPrefix }) })

  const headers = { 'api-authorization': token, 'content-type': 'application/json' }
  const created = await variants[0].app.inject({ method: 'POST', url: '/v1/links/create', headers, payload: { link: { url: 'https://example.com/bench' }, autofill: false } })
  if (created.statusCode !== 201) throw new Error(`create: ${created.statusCode} ${created.body}`)
  const uniq = created.json().uniq
  const update = (app: FastifyInstance, i: number) =>
    app.inject({ method: 'PUT', url: `/v1/links/${uniq}`, headers, payload: { link: { title: `title ${i}` }, autofill: false } })

  for (const { app } of variants) for (let i = 0; i < WARM_UP; i++) await update(app, i)

  const redisVariant = variants.find((variant) => variant.name === 'redis')!
  const commandsBefore = counter.commands
  const scriptsBefore = await scriptCalls(admin)
  // Request by request in turn (in a rotating order), so every variant meets the same conditions.
  for (let i = 0; i < REQUESTS; i++) {
    for (let k = 0; k < variants.length; k++) {
      const variant = variants[(i + k) % variants.length]
      const start = performance.now()
      const response = await update(variant.app, i)
      variant.times.push(performance.now() - start)
      if (response.statusCode !== 200) throw new Error(`${variant.name}: ${response.statusCode} ${response.body}`)
    }
  }
  const redisRequests = redisVariant.times.length
  const clientCommands = counter.commands - commandsBefore
  const serverScripts = (await scriptCalls(admin)) - scriptsBefore

  // The failure path: a refused update (404) reserves, then gives the slot back.
  const failBefore = counter.commands
  const FAILURES = 200
  for (let i = 0; i < FAILURES; i++) {
    const response = await redisVariant.app.inject({ method: 'PUT', url: '/v1/links/999999999', headers, payload: { link: {}, autofill: false } })
    if (response.statusCode !== 404) throw new Error(`expected 404, got ${response.statusCode}`)
  }
  const failCommands = counter.commands - failBefore

  const off = variants[0].times.slice().sort((a, b) => a - b)
  const offMedian = percentile(off, 50)
  const offP99 = percentile(off, 99)
  console.log(`database: ${databaseUrl ? 'PostgreSQL (DATABASE_URL)' : 'in-memory PGlite'}; Redis: ${redisUrl}`)
  console.log(`${REQUESTS} updates of one link per variant (app.inject, one at a time, variants in turn, ${WARM_UP} warm-up each)`)
  console.log('')
  console.log('variant        median ms   p99 ms   added median   added p99   median of paired differences')
  for (const variant of variants) {
    const sorted = variant.times.slice().sort((a, b) => a - b)
    const median = percentile(sorted, 50)
    const p99 = percentile(sorted, 99)
    // Request i of a variant against request i of "off", sent moments apart.
    const paired = variant.times.map((time, i) => time - variants[0].times[i]).sort((a, b) => a - b)
    console.log(
      `${variant.name.padEnd(12)} ${ms(median)}  ${ms(p99)}   ${ms(median - offMedian)}      ${ms(p99 - offP99)}    ${ms(percentile(paired, 50))}`,
    )
  }
  console.log('')
  console.log(`Redis round trips per successful request: ${(clientCommands / redisRequests).toFixed(2)} (client), ` +
    `${(serverScripts / redisRequests).toFixed(2)} scripts run by Redis (INFO commandstats; other clients of this Redis count too)`)
  console.log(`Redis round trips per failed request (404, refunded): ${(failCommands / FAILURES).toFixed(2)}`)
  console.log(`Database queries added: one per workspace and instance every ${LIMITS_CACHE_MS} ms (its quotas)`)

  for (const { app } of variants) await app.close()
  let cursor = '0'
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000)
    if (keys.length) await admin.del(...keys)
    cursor = next
  } while (cursor !== '0')
  admin.disconnect()
  redis.disconnect()
  for (const teardown of teardowns) await teardown()
}

await main()
