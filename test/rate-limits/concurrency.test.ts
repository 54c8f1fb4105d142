/**
 * Exactness under concurrency (contract section 8): with N slots left, at most N requests succeed however
 * many race, within one instance (the in-process store) and across two instances sharing one Redis, each
 * with its own database connection and Redis connection.
 */
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { openDatabase } from '../../src/db/database.js'
import { buildTestApp, client, json, openTestDatabase } from '../support/test-app.js'
import { countStatuses, quotaHeaders, quotaWorkspace, REDIS_URL, redisKeyPrefix } from './quota-support.js'

const { database, url: databaseUrl } = await openTestDatabase(t)
const { prisma } = database
const single = await buildTestApp(t, { database })

const url = (n: number | string) => `https://example.com/burst/${n}`

/** `count` creates, spread over the apps in turn, all sent at once. */
function burst(apps: FastifyInstance[], token: string, count: number, body: (i: number) => Record<string, unknown>) {
  return Promise.all(Array.from({ length: count }, (_, i) => client(apps[i % apps.length], token).create(body(i))))
}

t.test('one instance, in-process store: a burst of 3× the quota, exactly the quota succeeds', async (t) => {
  t.equal(single.app.quotas.storeKind, 'memory')
  const ws = await quotaWorkspace(prisma, 'memory burst', { hour: 10, day: 50 })
  const responses = await burst([single.app], ws.token, 30, (i) => ({ url: url(i) }))
  t.same(countStatuses(responses), { 201: 10, 429: 20 })
  const remaining = responses.filter((r) => r.statusCode === 201).map((r) => Number(quotaHeaders(r).remaining))
  t.same(remaining.sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 'each slot handed out once')
  t.equal(await prisma.link.count({ where: { workspace: { name: ws.name } } }), 10)
})

t.test('two instances sharing one Redis', { skip: REDIS_URL ? false : 'REDIS_URL is unset: no shared Redis to test' }, async (t) => {
  const keyPrefix = redisKeyPrefix(t)
  // The second instance opens a database connection of its own, as another process would.
  const secondDatabase = databaseUrl ? await openDatabase({ databaseUrl, dataDir: 'unused' }) : database
  if (secondDatabase !== database) t.teardown(() => secondDatabase.close())
  const env = { REDIS_URL: REDIS_URL! }
  const apps = [
    (await buildTestApp(t, { database, env, rateLimits: { keyPrefix } })).app,
    (await buildTestApp(t, { database: secondDatabase, env, rateLimits: { keyPrefix } })).app,
  ]
  t.same(apps.map((app) => app.quotas.storeKind), ['redis', 'redis'])

  t.test('a burst of 3× the hour quota: exactly the quota succeeds', async (t) => {
    const ws = await quotaWorkspace(prisma, 'redis burst', { hour: 20, day: 100 })
    const responses = await burst(apps, ws.token, 60, (i) => ({ url: url(i) }))
    t.same(countStatuses(responses), { 201: 20, 429: 40 })
    const remaining = responses.filter((r) => r.statusCode === 201).map((r) => Number(quotaHeaders(r).remaining))
    t.same(remaining.sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i), 'each slot handed out once')
    t.equal(await prisma.link.count({ where: { workspace: { name: ws.name } } }), 20)
  })

  t.test('a burst of updates bound by the day window', async (t) => {
    const ws = await quotaWorkspace(prisma, 'redis update burst', { hour: 100, day: 15 })
    const link = json(await client(apps[0], ws.token).create({ url: url('u') }))
    const responses = await Promise.all(
      Array.from({ length: 45 }, (_, i) => client(apps[i % 2], ws.token).update(link.uniq, { title: `title ${i}` })),
    )
    t.same(countStatuses(responses), { 200: 15, 429: 30 })
    t.ok(responses.filter((r) => r.statusCode === 429).every((r) => quotaHeaders(r).rateLimit?.startsWith('"day";r=0;')))
  })

  t.test('failing requests in the burst give their slots back: the quota is used exactly, never more', async (t) => {
    const ws = await quotaWorkspace(prisma, 'redis mixed burst', { hour: 12, day: 100 })
    t.equal((await client(apps[0], ws.token).create({ url: url('x'), id: 'taken' })).statusCode, 201)
    // Half the burst conflicts (409) and holds a slot only until it fails.
    const responses = await burst(apps, ws.token, 40, (i) => (i % 2 ? { url: url(i), id: 'taken' } : { url: url(i) }))
    const counts = countStatuses(responses)
    t.ok((counts[201] ?? 0) <= 11, `at most the 11 left succeed: ${JSON.stringify(counts)}`)
    t.equal((counts[201] ?? 0) + (counts[409] ?? 0) + (counts[429] ?? 0), 40)
    // Whatever the burst left, sequential creates now use exactly that and no more.
    let more = 0
    for (;;) {
      const response = await client(apps[more % 2], ws.token).create({ url: url(`after-${more}`) })
      if (response.statusCode !== 201) {
        t.equal(response.statusCode, 429)
        break
      }
      more++
    }
    t.equal(1 + (counts[201] ?? 0) + more, 12, `exactly the quota: 1 + ${counts[201] ?? 0} in the burst + ${more} after`)
    t.equal(await prisma.link.count({ where: { workspace: { name: ws.name } } }), 12)
  })
})
