/**
 * Exactness under concurrency (contract section 8): with N slots left, at most N requests succeed however
 * many race, within one instance (the in-process store) and across two instances sharing one Redis, each
 * with its own database connection and Redis connection.
 */
import type { FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
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

/**
 * Updates that will fail (404 by domain and slug, a 400 for changing the link's id) sent beside valid ones, all at once, with
 * the quota untouched: the failing ones take no slot even for a moment, so every valid update within the quota
 * succeeds (a 404 that held a slot while it looked for its link refused valid updates beside it, with a
 * Retry-After of an hour, while the whole quota was free).
 */
async function failuresBesideValidUpdates(t: Test, apps: FastifyInstance[], label: string) {
  const ws = await quotaWorkspace(prisma, label, { hour: 10, day: 100 })
  const api = (i: number) => client(apps[i % apps.length], ws.token)
  const link = json(await api(0).create({ url: url('target'), id: 'target' }, { autofill: false }))
  json(await api(0).create({ url: url('other'), id: 'other' }, { autofill: false }))
  const requests = Array.from({ length: 50 }, (_, i) => {
    if (i % 5 === 0) return api(i).update(link.uniq, { title: `valid ${i}` }, { autofill: false }).then((response) => ({ valid: true, response }))
    const failing = i % 5 === 1 ? api(i).update(link.uniq, { id: 'other' }, { autofill: false }) : api(i).updateByDomain(ws.domain, `missing-${i}`, { title: 'x' })
    return failing.then((response) => ({ valid: false, response }))
  })
  const answers = await Promise.all(requests)
  t.same(countStatuses(answers.filter((a) => a.valid).map((a) => a.response)), { 200: 10 }, 'every valid update within the quota succeeds')
  t.same(countStatuses(answers.filter((a) => !a.valid).map((a) => a.response)), { 400: 10, 404: 30 })
  const next = await api(1).update(link.uniq, { title: 'one too many' }, { autofill: false })
  t.equal(next.statusCode, 429, 'the eleventh valid update is over the quota')
  t.match(quotaHeaders(next).rateLimit, /^"hour";r=0;t=(3[5-9]\d\d|3600)$/)
}

t.test('one instance, in-process store: failing updates beside valid ones take no slot', (t) => failuresBesideValidUpdates(t, [single.app], 'memory failing beside valid'))

/**
 * Requests that fail only at their write, and so hold a slot for a moment (a create of a slug stored long ago with
 * autofill off, whose INSERT finds it; an update by uniq in one statement that changes the link's id), sent beside
 * valid ones at the quota's edge: a valid request refused meanwhile waits for those slots to be settled and asks
 * again, so every valid request within the quota succeeds (it was told 429, Retry-After 3600, while the slot was
 * about to be given back).
 */
async function lateFailuresBesideValid(t: Test, app: FastifyInstance, label: string) {
  // Creates and updates have a quota each: 10 an hour here, 2 creates used by the set-up.
  const ws = await quotaWorkspace(prisma, label, { hour: 10, day: 100 })
  const api = client(app, ws.token)
  const link = json(await api.create({ url: url('late'), id: 'late' }, { autofill: false }))
  json(await api.create({ url: url('taken'), id: 'taken' }, { autofill: false }))
  const send = (kind: number, i: number) =>
    kind === 0 ? api.create({ url: url(`valid-${i}`) }, { autofill: false })
    : kind === 1 ? api.create({ url: url(`taken-${i}`), id: 'taken' }, { autofill: false })
    : kind === 2 ? api.update(link.uniq, { title: `valid ${i}` }, { autofill: false })
    : api.update(link.uniq, { id: 'renamed', title: 'x' }, { autofill: false })
  const answers = await Promise.all(Array.from({ length: 32 }, (_, i) => send(i % 4, i).then((response) => ({ kind: i % 4, response }))))
  const of = (kind: number) => countStatuses(answers.filter((a) => a.kind === kind).map((a) => a.response))
  t.same(of(0), { 201: 8 }, 'every valid create within the quota (the 8 left) succeeds')
  t.same(of(1), { 409: 8 })
  t.same(of(2), { 200: 8 }, 'every valid update within the quota (8 of its 10) succeeds')
  t.same(of(3), { 400: 8 })
  const creates = (await api.create({ url: url('one-more') }, { autofill: false })).statusCode
  const updates = []
  for (const title of ['ninth', 'tenth', 'eleventh']) updates.push((await api.update(link.uniq, { title }, { autofill: false })).statusCode)
  t.same([creates, ...updates], [429, 200, 200, 429], 'each quota used exactly: the failed requests gave their slots back')
}

t.test('one instance, in-process store: requests that fail at their write hold no valid request back', (t) => lateFailuresBesideValid(t, single.app, 'memory late failures'))

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

  t.test('failing updates beside valid ones take no slot', (t) => failuresBesideValidUpdates(t, apps, 'redis failing beside valid'))
  t.test('requests that fail at their write hold no valid request of their instance back', (t) => lateFailuresBesideValid(t, apps[0], 'redis late failures'))

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
