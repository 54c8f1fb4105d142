/**
 * Idempotency-Key across instances (issue 14): two instances of the service, each with its own database
 * connection, share the key through the store: the database (always) and Redis (when REDIS_URL is set). A
 * request answered by one is replayed by the other; one in progress on one is 409 on the other; of many
 * requests with one key sent to both at once, exactly one creates. And when Redis cannot be reached, a
 * request with a key is refused (503) rather than run without the guarantee; one without a key goes on.
 */
import type { FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { openDatabase, type Database } from '../../src/db/database.js'
import { freePort, quotaWorkspace, REDIS_URL, redisKeyPrefix } from '../rate-limits/quota-support.js'
import { buildTestApp, openTestDatabase } from '../support/test-app.js'
import { TcpProxy } from '../support/tcp-proxy.js'
import { CREATE, heldPage, post, replayed } from './idempotency-support.js'
import { waitFor } from '../support/polling.js'

const { database, url: databaseUrl } = await openTestDatabase(t)
const { prisma } = database
const env = { AUTOFILL_ALLOW_PRIVATE: 'true', AUTOFILL_TIMEOUT_MS: '30000' }

/** A second connection to the test's database, as a second process would open (the same one on the embedded database). */
async function secondConnection(t: { teardown(fn: () => unknown): void }): Promise<Database> {
  if (!databaseUrl) return database
  const second = await openDatabase({ databaseUrl, dataDir: 'unused', migrate: false })
  t.teardown(() => second.close())
  return second
}

async function acrossInstances(t: Test, store: string, apps: FastifyInstance[]) {
  t.same(apps.map((app) => app.idempotency.storeKind), [store, store])
  const linksOf = (workspace: string) => prisma.link.count({ where: { workspace: { name: workspace } } })

  t.test('answered by one instance, replayed by the other', async (t) => {
    const ws = await quotaWorkspace(prisma, `${store} instances replay`, {})
    const body = { link: { url: 'https://example.com/two' }, autofill: false }
    const first = await post(apps[0], ws.token, CREATE, body, 'across')
    t.equal(first.statusCode, 201)
    const second = await post(apps[1], ws.token, CREATE, body, 'across')
    t.same([second.statusCode, second.body, second.headers.location, replayed(second)], [201, first.body, first.headers.location, 'true'])
    t.equal((await post(apps[1], ws.token, CREATE, { link: { url: 'https://example.com/other' } }, 'across')).statusCode, 422)
    t.equal(await linksOf(ws.name), 1)
  })

  t.test('in progress on one instance: 409 on the other', async (t) => {
    const ws = await quotaWorkspace(prisma, `${store} instances progress`, {})
    const held = await heldPage(t)
    const body = { link: { url: held.url } }
    const first = post(apps[0], ws.token, CREATE, body, 'held')
    t.ok(await held.fetched())
    const concurrent = await post(apps[1], ws.token, CREATE, body, 'held')
    t.match([concurrent.statusCode, concurrent.json().code], [409, 'idempotency_key_in_use'])
    held.release()
    const answer = await first
    t.equal(answer.statusCode, 201)
    t.equal((await post(apps[1], ws.token, CREATE, body, 'held')).body, answer.body)
    t.equal(await linksOf(ws.name), 1)
  })

  t.test('a burst with one key on both instances: one link, every other answer a 409 or the replay', async (t) => {
    const ws = await quotaWorkspace(prisma, `${store} instances burst`, {})
    const body = { link: { url: 'https://example.com/burst', id: 'burst' }, autofill: false }
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => post(apps[i % 2], ws.token, CREATE, body, 'burst-key')))
    const created = responses.filter((response) => response.statusCode === 201 && !replayed(response))
    t.equal(created.length, 1, 'exactly one request created')
    for (const response of responses) {
      if (response.statusCode === 201) t.equal(response.body, created[0].body)
      else t.match([response.statusCode, response.json().code], [409, 'idempotency_key_in_use'])
    }
    t.equal(await linksOf(ws.name), 1)
  })
}

t.test('two instances on one database (no REDIS_URL)', async (t) => {
  const second = await secondConnection(t)
  const apps = [(await buildTestApp(t, { database, env })).app, (await buildTestApp(t, { database: second, env })).app]
  await acrossInstances(t, 'database', apps)
})

t.test('two instances sharing one Redis', { skip: REDIS_URL ? false : 'REDIS_URL is unset: no shared Redis to test' }, async (t) => {
  const keyPrefix = redisKeyPrefix(t)
  const second = await secondConnection(t)
  const options = { env: { ...env, REDIS_URL: REDIS_URL! }, idempotency: { keyPrefix }, rateLimits: { keyPrefix } }
  const apps = [(await buildTestApp(t, { database, ...options })).app, (await buildTestApp(t, { database: second, ...options })).app]
  await acrossInstances(t, 'redis', apps)
})

t.test('Redis unreachable: a request with a key is 503 and creates nothing; one without goes on', async (t) => {
  // A port nothing listens on: Redis refuses at once, as when it is down.
  const warnings: { msg: string; err?: { message: string } }[] = []
  const { app } = await buildTestApp(t, {
    database,
    env: { REDIS_URL: `redis://127.0.0.1:${await freePort()}` },
    logger: { level: 'warn', stream: { write: (line: string) => void warnings.push(JSON.parse(line)) } },
  })
  t.equal(app.idempotency.storeKind, 'redis')
  const ws = await quotaWorkspace(prisma, 'redis down', {})
  const body = { link: { url: 'https://example.com/down' }, autofill: false }
  const refused = await post(app, ws.token, CREATE, body, 'down-key')
  t.equal(refused.statusCode, 503)
  t.equal(refused.headers['retry-after'], '2')
  t.match(refused.json(), { code: 'unavailable', detail: /idempotency key store/ })
  t.equal(await prisma.link.count({ where: { workspace: { name: ws.name } } }), 0)
  for (const key of ['down-key-2', 'down-key-3']) t.equal((await post(app, ws.token, CREATE, body, key)).statusCode, 503)
  const keyStoreLines = warnings.filter((line) => /idempotency key/.test(`${line.msg} ${line.err?.message}`))
  t.equal(keyStoreLines.length, 1, 'the outage is logged once (a minute), not per request')
  t.match(keyStoreLines[0], { msg: /service unavailable/, err: { message: /ECONNREFUSED|Redis|reach/ } }, 'with what the store said')
  t.equal((await post(app, ws.token, CREATE, body)).statusCode, 201, 'without a key: RATE_LIMIT_ON_REDIS_ERROR=allow lets it through')
})

t.test('Redis slow or away at the edges of a request with a key: no key blocked for its lease, no request run twice', { skip: REDIS_URL ? false : 'REDIS_URL is unset' }, async (t) => {
  const { proxy, url: redisUrl } = await TcpProxy.inFrontOf(REDIS_URL!)
  t.teardown(() => proxy.close())
  const keyPrefix = redisKeyPrefix(t)
  const { app } = await buildTestApp(t, { database, env: { ...env, REDIS_URL: redisUrl }, idempotency: { keyPrefix }, rateLimits: { keyPrefix } })
  const linksOf = (workspace: string) => prisma.link.count({ where: { workspace: { name: workspace } } })

  t.test('a claim Redis makes after the request stopped waiting is released: the retry runs', async (t) => {
    // Before, the claim made 400 ms late held the key for its whole lease (2 min): every retry got 409.
    const ws = await quotaWorkspace(prisma, 'late claim', {})
    const body = { link: { url: 'https://example.com/late-claim' }, autofill: false }
    proxy.delayReplies(400)
    const refused = await post(app, ws.token, CREATE, body, 'late-claim')
    t.equal(refused.statusCode, 503, 'the key store did not answer in time: not run')
    proxy.restore()
    t.ok(await waitFor(async () => (await post(app, ws.token, CREATE, body, 'late-claim')).statusCode === 201, 3000), 'the retry runs')
    t.equal(await linksOf(ws.name), 1)
  })

  t.test('an answer Redis could not take as the request ended is kept once Redis is back', async (t) => {
    // Before, the claim expired with its lease and the retry created a second link.
    const ws = await quotaWorkspace(prisma, 'answer kept late', {})
    const held = await heldPage(t)
    const body = { link: { url: held.url } }
    const first = post(app, ws.token, CREATE, body, 'kept-late')
    t.ok(await held.fetched(), 'in progress, the key claimed')
    proxy.refuse()
    held.release()
    const answered = await first
    t.equal(answered.statusCode, 201, 'answered while Redis is away')
    t.match((await post(app, ws.token, CREATE, body, 'kept-late')).statusCode, 503, 'a retry now: the store cannot say')
    proxy.restore()
    let replay: Awaited<ReturnType<typeof post>> | undefined
    t.ok(await waitFor(async () => (replay = await post(app, ws.token, CREATE, body, 'kept-late')).statusCode === 201, 5000), 'then the answer')
    t.same([replay?.body, replayed(replay!)], [answered.body, 'true'], 'the first answer, replayed')
    t.equal(await linksOf(ws.name), 1, 'one link')
  })
})
