/**
 * What autofill costs a create when the page is cached (`npm run bench:autofill`): creates per second
 * with autofill on a URL whose metadata is cached versus autofill off, in one run, the two taking turns.
 * The page is served by a local HTTP server (AUTOFILL_ALLOW_PRIVATE, loopback only); it must see exactly
 * one request, the fetch that filled the cache. With REDIS_URL set, the Redis cache is measured too.
 *
 * Options (environment): BENCH_REQUESTS (creates per variant, default 2000), BENCH_CONCURRENCY (default 1;
 * more sends that many creates at a time), DATABASE_URL (else an in-memory PGlite).
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { performance } from 'node:perf_hooks'
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../src/app.js'
import { isLoopbackAddress } from '../src/autofill/address-policy.js'
import { loadConfig } from '../src/config/config.js'
import { addDomain, createToken } from '../src/workspaces/workspace-repository.js'
import { openTestDatabase } from '../test/support/test-app.js'

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 2000)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 1)
const WARM_UP = 200
const redisUrl = process.env.REDIS_URL

let pageRequests = 0
const page = createServer((_request, response) => {
  pageRequests++
  response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
  response.end(`<!doctype html><html><head><title>Bench page</title>
<meta property="og:title" content="Summer sale"><meta property="og:description" content="Everything must go">
<meta property="og:image" content="/sale.png"><link rel="icon" href="/icon.png"></head><body>sale</body></html>`)
})
await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve))
const pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/summer`

async function main() {
  const teardowns: (() => unknown)[] = []
  const { database } = await openTestDatabase({ teardown: (fn) => teardowns.unshift(fn) })
  const suffix = randomBytes(3).toString('hex')
  const workspace = `bench-${suffix}`
  const host = `go.${suffix}.bench`
  const { token } = await createToken(database.prisma, { workspace })
  await addDomain(database.prisma, { workspace, host, isDefault: true, reservedDomains: ['short.bench'] })

  const build = async (env: Record<string, string>) =>
    buildApp({
      config: loadConfig({
        DEFAULT_DOMAIN: 'short.bench',
        RESERVED_DOMAINS: 'short.bench',
        LOG_LEVEL: 'silent',
        AUTOFILL_ALLOW_PRIVATE: 'true',
        ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
        ...env,
      }),
      database,
      logger: false,
      rateLimits: { enabled: false },
      autofill: { restrictAddress: isLoopbackAddress, keyPrefix: `bench-${suffix}:` },
    })

  const memoryApp = await build({})
  const variants: { name: string; app: FastifyInstance; autofill: boolean; seconds: number }[] = [
    { name: 'autofill off', app: memoryApp, autofill: false, seconds: 0 },
    { name: 'autofill on, cached in process', app: memoryApp, autofill: true, seconds: 0 },
  ]
  if (redisUrl) variants.push({ name: 'autofill on, cached in Redis', app: await build({ REDIS_URL: redisUrl }), autofill: true, seconds: 0 })

  const headers = { 'api-authorization': token, 'content-type': 'application/json' }
  const create = async (variant: (typeof variants)[number]) => {
    const response = await variant.app.inject({
      method: 'POST',
      url: '/v1/links/create',
      headers,
      payload: { link: { url: pageUrl }, autofill: variant.autofill },
    })
    const expected = variant.autofill ? 'filled' : 'skipped'
    if (response.statusCode !== 201 || response.headers['x-autofill'] !== expected) {
      throw new Error(`${variant.name}: ${response.statusCode} ${response.headers['x-autofill']} ${response.body}`)
    }
  }
  const batch = async (variant: (typeof variants)[number], count: number) => {
    for (let sent = 0; sent < count; sent += CONCURRENCY) {
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, count - sent) }, () => create(variant)))
    }
  }

  for (const variant of variants) await batch(variant, WARM_UP)
  // Rounds of 100 per variant in turn, so drift affects every variant alike.
  for (let done = 0; done < REQUESTS; done += 100) {
    for (const variant of variants) {
      const start = performance.now()
      await batch(variant, Math.min(100, REQUESTS - done))
      variant.seconds += (performance.now() - start) / 1000
    }
  }

  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL (DATABASE_URL)' : 'in-memory PGlite'}`)
  console.log(`${REQUESTS} creates per variant through app.inject, ${CONCURRENCY} at a time, variants in turn`)
  console.log('')
  const off = variants[0].seconds
  for (const variant of variants) {
    const perSecond = REQUESTS / variant.seconds
    const cost = ((variant.seconds - off) / REQUESTS) * 1000
    console.log(`${variant.name.padEnd(32)} ${perSecond.toFixed(0).padStart(6)} creates/s   ${cost.toFixed(3).padStart(7)} ms added per create`)
  }
  console.log('')
  console.log(`requests that reached the page: ${pageRequests} (the one fetch per cache; everything else was a cache hit)`)

  for (const app of new Set(variants.map((variant) => variant.app))) await app.close()
  for (const teardown of teardowns) await teardown()
  page.close()
}

await main()
