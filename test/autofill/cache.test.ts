/**
 * The per-page cache of autofill and its neighbours: two instances sharing the Redis cache (one fetch for
 * both, an hour for metadata, a minute for a failure), a Redis that cannot be reached (pages are fetched
 * without it), the in-process cache's expiry and bound, and a create over its quota (no fetch at all).
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { Agent } from 'undici'
import { Autofill } from '../../src/autofill/autofill.js'
import { FAILURE_TTL_MS, MemoryMetadataCache, METADATA_TTL_MS, RedisMetadataCache } from '../../src/autofill/metadata-cache.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { freePort, REDIS_URL, redisKeyPrefix } from '../rate-limits/quota-support.js'
import { buildTestApp, client, createWorkspaceToken, json } from '../support/test-app.js'
import { answerWhenReleased, page, startPageServer, status } from './page-server.js'

const ALLOW_PRIVATE = { AUTOFILL_ALLOW_PRIVATE: 'true' }
const PAGE = '<html><head><title>Cached page</title><meta name="description" content="From the cache">' +
  '<meta property="og:image" content="/i.png"><link rel="icon" href="/icon.png"></head></html>'

const first = await buildTestApp(t, { env: ALLOW_PRIVATE })
const { prisma, database } = first
const token = await createWorkspaceToken(prisma, { workspace: 'cache', defaultDomain: 'go.cache.test' })
const server = await startPageServer(t)
server.route('/page', page(PAGE))
server.route('/broken', status(500, 'down'))

t.test('two instances share the Redis cache: one fetch for both; an hour for metadata, a minute for a failure', { skip: REDIS_URL ? false : 'REDIS_URL is not set' }, async (t) => {
  const keyPrefix = redisKeyPrefix(t)
  const env = { ...ALLOW_PRIVATE, REDIS_URL: REDIS_URL! }
  const [a, b] = await Promise.all([0, 1].map(() => buildTestApp(t, { database, env, autofill: { keyPrefix }, rateLimits: { keyPrefix }, idempotency: { keyPrefix }, redirects: { keyPrefix }, visits: { keyPrefix } })))
  const url = server.url('/page?shared')
  const fromA = await client(a.app, token).create({ url })
  t.equal(fromA.headers['x-autofill'], 'filled')
  const fromB = await client(b.app, token).create({ url })
  t.equal(fromB.headers['x-autofill'], 'filled')
  t.equal(json(fromB).title, 'Cached page')
  t.equal(json(fromB).image, server.url('/i.png'))
  t.equal(server.requests('/page').filter((request) => request.url === '/page?shared').length, 1, 'the second instance used the cache')

  const failed = await client(a.app, token).create({ url: server.url('/broken') })
  t.equal(failed.headers['x-autofill'], 'failed')
  t.equal((await client(b.app, token).create({ url: server.url('/broken') })).headers['x-autofill'], 'failed')
  t.equal(server.requests('/broken').length, 1, 'the failure is remembered too')

  const redis = new Redis(REDIS_URL!)
  t.teardown(() => redis.disconnect())
  const cache = new RedisMetadataCache(redis, { keyPrefix })
  const metadataTtl = await redis.pttl(cache.key(url))
  t.ok(metadataTtl > METADATA_TTL_MS - 60_000 && metadataTtl <= METADATA_TTL_MS, `metadata kept for an hour (${metadataTtl} ms left)`)
  const failureTtl = await redis.pttl(cache.key(server.url('/broken')))
  t.ok(failureTtl > 0 && failureTtl <= FAILURE_TTL_MS, `a failure kept for a minute (${failureTtl} ms left)`)
})

t.test('a cached value of another shape (another version, set by hand) is a miss: the page is fetched, never a 500', { skip: REDIS_URL ? false : 'REDIS_URL is not set' }, async (t) => {
  const keyPrefix = redisKeyPrefix(t)
  const { app } = await buildTestApp(t, { database, env: { ...ALLOW_PRIVATE, REDIS_URL: REDIS_URL! }, autofill: { keyPrefix }, rateLimits: { keyPrefix } })
  const redis = new Redis(REDIS_URL!)
  t.teardown(() => redis.disconnect())
  const cache = new RedisMetadataCache(redis, { keyPrefix })
  const odd = ['{}', '"x"', '[1]', '{"metadata":{"title":5}}', '{"metadata":{"image":"javascript:alert(1)"}}', `{"metadata":{"title":"${'t'.repeat(513)}"}}`, '{"failure":7}', 'not json']
  for (const [i, value] of odd.entries()) {
    const url = server.url(`/page?odd=${i}`)
    await redis.set(cache.key(url), value, 'PX', 60_000)
    const response = await client(app, token).create({ url })
    t.equal(response.statusCode, 201, `${value.slice(0, 40)}: created`)
    t.equal(response.headers['x-autofill'], 'filled', `${value.slice(0, 40)}: filled from the page`)
    t.equal(json(response).title, 'Cached page')
  }
})

t.test('a Redis that cannot be reached: pages are fetched without the cache, and it is logged once', async (t) => {
  const port = await freePort()
  const warnings: string[] = []
  const { app } = await buildTestApp(t, {
    database,
    env: { ...ALLOW_PRIVATE, REDIS_URL: `redis://127.0.0.1:${port}` },
    logger: { level: 'warn', stream: { write: (line: string) => void warnings.push(JSON.parse(line).msg) } },
  })
  for (const query of ['a', 'b']) {
    const started = Date.now()
    const response = await client(app, token).create({ url: server.url(`/page?no-redis-${query}`) })
    t.equal(response.statusCode, 201)
    t.equal(response.headers['x-autofill'], 'filled')
    // A bound against a hang (waiting on Redis to come back), not a speed target: the page answers at once, and each
    // Redis call gives up after 250 ms, but a loaded machine running the embedded database took 3.4 s once.
    t.ok(Date.now() - started < 10_000, `answered in ${Date.now() - started} ms, not held up by the unreachable Redis`)
  }
  t.equal(warnings.filter((msg) => /autofill cache unreachable/.test(msg)).length, 1, 'one warning, not one per request')
})

t.test('over its quota, a create fetches nothing', async (t) => {
  const limited = await createWorkspaceToken(prisma, { workspace: 'limited', defaultDomain: 'go.limited.test' })
  await setLimits(prisma, { workspace: 'limited', hour: 1 })
  const api = client(first.app, limited)
  t.equal((await api.create({ url: server.url('/page?quota-1') })).headers['x-autofill'], 'filled')
  const refused = await api.create({ url: server.url('/page?quota-2') })
  t.equal(refused.statusCode, 429)
  t.equal(refused.headers['x-autofill'], undefined)
  t.same(server.requests('/page').filter((request) => request.url === '/page?quota-2'), [], 'no request for the refused create')
})

t.test('the in-process cache: metadata for an hour, failures for a minute, the oldest entries dropped past its bounds', async (t) => {
  const START = 1_000_000
  let now = START
  const cache = new MemoryMetadataCache({ maxEntries: 2, now: () => now })
  await cache.set('https://a.example/', { metadata: { title: 'A' } })
  await cache.set('https://b.example/', { failure: 'the page answered 500' })
  now = START + FAILURE_TTL_MS - 1
  t.same(await cache.get('https://b.example/'), { failure: 'the page answered 500' })
  now = START + FAILURE_TTL_MS + 1
  t.equal(await cache.get('https://b.example/'), undefined, 'a failure is forgotten after a minute')
  now = START + METADATA_TTL_MS - 1
  t.same(await cache.get('https://a.example/'), { metadata: { title: 'A' } })
  now = START + METADATA_TTL_MS + 1
  t.equal(await cache.get('https://a.example/'), undefined, 'metadata is forgotten after an hour')

  for (const host of ['a', 'b', 'c']) await cache.set(`https://${host}.example/`, { metadata: { title: host } })
  t.equal(await cache.get('https://a.example/'), undefined, 'the oldest entry made room')
  t.same(await cache.get('https://c.example/'), { metadata: { title: 'c' } })

  // Pages of long texts: bounded by their bytes too, not only by their number.
  const small = new MemoryMetadataCache({ maxBytes: 10_000 })
  for (const host of ['a', 'b', 'c', 'd']) await small.set(`https://${host}.example/`, { metadata: { title: host.repeat(2000) } })
  t.equal(await small.get('https://a.example/'), undefined, 'past 10,000 bytes the least recent page made room')
  t.equal(await small.get('https://b.example/'), undefined)
  t.match(await small.get('https://d.example/'), { metadata: { title: 'd'.repeat(2000) } })
})

t.test('a fetch ended because the instance is closing is not remembered as the page failing', async (t) => {
  server.route('/stopped', answerWhenReleased(t, status(200)).handler)
  const cache = new MemoryMetadataCache()
  const stop = new AbortController()
  const dispatcher = new Agent()
  t.teardown(() => dispatcher.destroy())
  const autofill = new Autofill({ dispatcher, timeoutMs: 60_000, maxBytes: 65_536, userAgent: 'test', cache, stop: stop.signal })
  const url = server.url('/stopped')
  const filling = autofill.fill(url, { title: null, image: null, description: null, favicon: null })
  await new Promise((resolve) => setTimeout(resolve, 200))
  stop.abort()
  t.match(await filling, { status: 'failed', reason: /closing/ })
  t.equal(await cache.get(url), undefined, 'nothing cached: another instance may fetch it fine')
})
