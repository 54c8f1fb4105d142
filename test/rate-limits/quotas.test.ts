/**
 * Contract section 8 through the API: the quota edge, the headers of the tighter window, sliding windows
 * and an accurate Retry-After (on a clock the test drives), refunds of refused requests, create and update
 * counted apart, per-workspace quotas changed while running, official tokens. Every scenario runs on the
 * in-process store and, when REDIS_URL is set, on that Redis too.
 */
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { LIMITS_CACHE_MS } from '../../src/plugins/rate-limits.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { buildTestApp, client, json } from '../support/test-app.js'
import { FakeClock, quotaHeaders, quotaWorkspace, REDIS_URL, redisKeyPrefix, T0 } from './quota-support.js'

const clock = new FakeClock()
const memory = await buildTestApp(t, { rateLimits: { now: clock.now } })
const { prisma } = memory
const apps: { store: string; app: FastifyInstance }[] = [{ store: 'in-process', app: memory.app }]
if (REDIS_URL) {
  const redis = await buildTestApp(t, {
    database: memory.database,
    env: { REDIS_URL },
    rateLimits: { now: clock.now, keyPrefix: redisKeyPrefix(t) },
  })
  apps.push({ store: 'redis', app: redis.app })
}

const url = (n: number | string) => `https://example.com/page/${n}`

for (const { store, app } of apps) {
  t.test(`${store} store`, async (t) => {
    t.equal(app.quotas.storeKind, store === 'redis' ? 'redis' : 'memory')

    t.test('exactly the quota passes; the next request gets 429 with the quota headers', async (t) => {
      clock.set(T0)
      const ws = await quotaWorkspace(prisma, `${store} edge`, { hour: 5, day: 8 })
      const api = client(app, ws.token)
      for (let i = 1; i <= 5; i++) {
        const response = await api.create({ url: url(i) })
        t.equal(response.statusCode, 201, `create ${i}`)
        t.same(quotaHeaders(response), {
          policy: '"hour";q=5;w=3600, "day";q=8;w=86400',
          rateLimit: `"hour";r=${5 - i};t=3600`,
          limit: '5',
          remaining: String(5 - i),
          reset: '3600',
        })
      }
      clock.advance(2)
      const refused = await api.create({ url: url(6) })
      t.equal(refused.statusCode, 429)
      t.match(refused.headers['content-type'], /^application\/problem\+json/)
      t.equal(refused.headers['retry-after'], '3598', 'the first create stops counting an hour after it was taken')
      t.same(quotaHeaders(refused), {
        policy: '"hour";q=5;w=3600, "day";q=8;w=86400',
        rateLimit: '"hour";r=0;t=3598',
        limit: '5',
        remaining: '0',
        reset: '3598',
      })
      t.match(json(refused), {
        type: 'about:blank',
        title: 'Too Many Requests',
        status: 429,
        code: 'rate_limited',
        detail: /quota of 5 creates per hour .* try again in 3598 s/,
      })
      t.equal(await prisma.link.count({ where: { workspace: { name: ws.name } } }), 5, 'nothing stored for the 429')
      t.equal((await api.create({ url: url(7) })).statusCode, 429, 'a refused request took nothing, and still none is free')
    })

    t.test('the headers follow the tighter window, and Retry-After the window that is full', async (t) => {
      clock.set(T0)
      const ws = await quotaWorkspace(prisma, `${store} tighter`, { hour: 5, day: 8 })
      const api = client(app, ws.token)
      for (let i = 1; i <= 5; i++) t.equal((await api.create({ url: url(i) })).statusCode, 201)
      // An hour later the hour is free again; the day still counts the five.
      clock.advance(3600)
      const next = await api.create({ url: url(6) })
      t.equal(next.statusCode, 201)
      // The first five stop counting in the day at T0 + 86,400 s.
      t.same(quotaHeaders(next), {
        policy: '"hour";q=5;w=3600, "day";q=8;w=86400',
        rateLimit: '"day";r=2;t=82800',
        limit: '8',
        remaining: '2',
        reset: '82800',
      })
      t.equal((await api.create({ url: url(7) })).statusCode, 201)
      t.equal((await api.create({ url: url(8) })).statusCode, 201)
      const refused = await api.create({ url: url(9) })
      t.equal(refused.statusCode, 429)
      t.equal(refused.headers['retry-after'], '82800')
      t.equal(quotaHeaders(refused).rateLimit, '"day";r=0;t=82800')
      t.match(json(refused).detail, /quota of 8 creates per day/)

      clock.advance(82799)
      t.equal((await api.create({ url: url(10) })).statusCode, 429, 'one second before Retry-After: still full')
      clock.advance(1)
      const freed = await api.create({ url: url(11) })
      t.equal(freed.statusCode, 201, 'after exactly Retry-After seconds: a slot is free')
      t.equal(quotaHeaders(freed).remaining, '4', 'the first five stopped counting: 8 - 3 - 1 left')
    })

    t.test('the window slides: Retry-After is exact on both sides, and slots free in the order they were taken', async (t) => {
      clock.set(T0 + 4000)
      const ws = await quotaWorkspace(prisma, `${store} sliding`, { hour: 3, day: 100 })
      const api = client(app, ws.token)
      t.equal((await api.create({ url: url(1) })).statusCode, 201)
      clock.set(T0 + 125_000)
      t.equal((await api.create({ url: url(2) })).statusCode, 201)
      t.equal((await api.create({ url: url(3) })).statusCode, 201)

      const full = await api.create({ url: url(4) })
      t.equal(full.statusCode, 429)
      // The first request, taken at T0 + 4 s, stops counting at T0 + 3604 s.
      t.equal(full.headers['retry-after'], '3479')
      clock.advance(3478)
      const early = await api.create({ url: url(5) })
      t.equal(early.statusCode, 429, 'one second early')
      t.equal(early.headers['retry-after'], '1')
      clock.advance(1)
      t.equal((await api.create({ url: url(6) })).statusCode, 201, 'on time: the oldest slot is free')

      const again = await api.create({ url: url(7) })
      t.equal(again.statusCode, 429, 'only the oldest slot freed: the two later ones still count')
      t.equal(again.headers['retry-after'], '121', 'they stop counting at T0 + 125 s + 3600 s')
      clock.advance(120)
      t.equal((await api.create({ url: url(8) })).statusCode, 429)
      clock.advance(1)
      t.equal((await api.create({ url: url(9) })).statusCode, 201)
      t.equal((await api.create({ url: url(10) })).statusCode, 201)
      t.equal((await api.create({ url: url(11) })).statusCode, 429)
    })

    t.test('refused requests consume nothing (400, 403, 404, 409, 415, schema errors); 401 has no quota headers', async (t) => {
      clock.set(T0)
      const ws = await quotaWorkspace(prisma, `${store} refunds`, { hour: 3, day: 10 })
      const api = client(app, ws.token)
      const first = await api.create({ url: url(1), id: 'taken' })
      t.equal(first.statusCode, 201)
      t.equal(quotaHeaders(first).remaining, '2')

      const failures = [
        ['409 slug_taken', () => api.create({ url: url(2), id: 'taken' }), 409],
        ['409 slug_taken, another case', () => api.create({ url: url(2), id: 'TAKEN' }), 409],
        ['400 slug_reserved', () => api.create({ url: url(3), id: 'docs' }), 400],
        ['400 redirect_loop', () => api.create({ url: `https://${ws.domain}/x` }), 400],
        ['403 domain_not_allowed', () => api.create({ url: url(4), domain: 'elsewhere.test' }), 403],
        ['400 validation_failed (schema)', () => api.create({ url: 5 }), 400],
        ['400 invalid_json', () => api.send('POST', '/v1/links/create', '{"link":'), 400],
        ['415', () => api.send('POST', '/v1/links/create', '{}', { 'content-type': 'text/plain' }), 415],
      ] as const
      for (const [what, send, status] of failures) {
        for (let i = 0; i < 2; i++) {
          const response = await send()
          t.equal(response.statusCode, status, what)
          t.equal(quotaHeaders(response).rateLimit, '"hour";r=2;t=3600', `${what}: still 2 left, and said so`)
        }
      }
      const anonymous = await client(app, 'sl_not-a-token').create({ url: url(5) })
      t.equal(anonymous.statusCode, 401)
      t.same(quotaHeaders(anonymous), { policy: undefined, rateLimit: undefined, limit: undefined, remaining: undefined, reset: undefined })

      t.equal((await api.create({ url: url(6) })).statusCode, 201)
      t.equal((await api.create({ url: url(7) })).statusCode, 201)
      t.equal((await api.create({ url: url(8) })).statusCode, 429, 'the whole quota was there, and no more')
      for (const autofill of [false, true]) {
        const taken = await api.create({ url: url(9), id: 'TAKEN' }, { autofill })
        t.equal(taken.statusCode, 409, `over the quota, a taken slug is still 409 (autofill ${autofill}): clients retry with a suffix on 409`)
        const next = await api.create({ url: url(9), id: 'taken-2' }, { autofill })
        t.equal(next.statusCode, 429, 'and the retry gets the 429')
      }
    })

    t.test('updates that fail (404, 400) consume nothing', async (t) => {
      clock.set(T0)
      const ws = await quotaWorkspace(prisma, `${store} update refunds`, { hour: 3, day: 10 })
      const api = client(app, ws.token)
      const link = json(await api.create({ url: url(1), id: 'mine' }))
      for (let i = 0; i < 3; i++) {
        const missing = await api.update(999_999_999, { title: 'x' })
        t.equal(missing.statusCode, 404)
        t.equal(quotaHeaders(missing).remaining, '3')
        t.equal((await api.updateByDomain(ws.domain, 'nope', { title: 'x' })).statusCode, 404)
        t.equal((await api.update(link.uniq, { id: 'other' })).statusCode, 400, 'the slug cannot change')
      }
      for (let i = 1; i <= 3; i++) {
        const response = i === 2 ? await api.updateByDomain(ws.domain, 'mine', { title: `t${i}` }) : await api.update(link.uniq, { title: `t${i}` })
        t.equal(response.statusCode, 200)
        t.equal(quotaHeaders(response).remaining, String(3 - i))
      }
      const refused = await api.update(link.uniq, { title: 'one too many' })
      t.equal(refused.statusCode, 429)
      t.equal(json(await api.update(link.uniq, {})).code, 'rate_limited', 'an update that changes nothing is still an update')
      t.equal(await prisma.link.count({ where: { uniq: link.uniq, title: 't3' } }), 1, 'the refused update stored nothing')
      t.equal((await api.update(999_999_999, { title: 'x' })).statusCode, 404, 'over the quota, a missing link is still 404')
    })

    t.test('create and update have quotas of their own', async (t) => {
      clock.set(T0)
      const ws = await quotaWorkspace(prisma, `${store} separate`, { hour: 2, day: 10 })
      const api = client(app, ws.token)
      const link = json(await api.create({ url: url(1), id: 'one' }))
      t.equal((await api.create({ url: url(2) })).statusCode, 201)
      t.equal((await api.create({ url: url(3) })).statusCode, 429, 'creates used up')
      const update = await api.update(link.uniq, { title: 'still allowed' })
      t.equal(update.statusCode, 200)
      t.equal(quotaHeaders(update).rateLimit, '"hour";r=1;t=3600', 'the update counter starts full')
      t.equal((await api.updateByDomain(ws.domain, 'one', { title: 'again' })).statusCode, 200)
      t.equal((await api.update(link.uniq, { title: 'no' })).statusCode, 429, 'updates used up')
      t.equal((await api.create({ url: url(4) })).statusCode, 429)
    })

    t.test('limits:set changes one workspace\'s quotas within LIMITS_CACHE_MS, no restart', async (t) => {
      t.equal(LIMITS_CACHE_MS, 2000, 'each instance reads a workspace\'s quotas at most every 2 s')
      clock.set(T0)
      const ws = await quotaWorkspace(prisma, `${store} override`, {})
      const other = await quotaWorkspace(prisma, `${store} untouched`, {})
      const api = client(app, ws.token)
      const first = await api.create({ url: url(1) })
      t.same(quotaHeaders(first), {
        policy: '"hour";q=1000;w=3600, "day";q=10000;w=86400',
        rateLimit: '"hour";r=999;t=3600',
        limit: '1000',
        remaining: '999',
        reset: '3600',
      }, 'the defaults')

      await setLimits(prisma, { workspace: ws.name, hour: 2 })
      clock.advance(2)
      const second = await api.create({ url: url(2) })
      t.equal(second.statusCode, 201)
      t.equal(quotaHeaders(second).policy, '"hour";q=2;w=3600, "day";q=10000;w=86400')
      t.equal(quotaHeaders(second).rateLimit, '"hour";r=0;t=3598')
      t.equal((await api.create({ url: url(3) })).statusCode, 429)

      await setLimits(prisma, { workspace: ws.name, hour: 10, day: 3 })
      clock.advance(2)
      const third = await api.create({ url: url(4) })
      t.equal(third.statusCode, 201, 'raised: room again')
      t.equal(quotaHeaders(third).rateLimit, '"day";r=0;t=86396', 'now the day is the tighter window')
      const refused = await api.create({ url: url(5) })
      t.equal(refused.statusCode, 429)
      t.equal(refused.headers['retry-after'], '86396')

      await setLimits(prisma, { workspace: ws.name, hour: 1, day: 100 })
      clock.advance(2)
      const lowered = await api.create({ url: url(6) })
      t.equal(lowered.statusCode, 429, 'lowered under what is used')
      t.equal(quotaHeaders(lowered).rateLimit, '"hour";r=0;t=3598', 'the third oldest (taken at T0 + 4 s) must go for one to fit')

      await setLimits(prisma, { workspace: ws.name, hour: 0 })
      clock.advance(2)
      const closed = await api.create({ url: url(7) })
      t.equal(closed.statusCode, 429, 'a quota of 0 refuses everything')
      t.equal(closed.headers['retry-after'], '3600', 'no expiry frees a slot: a whole window')

      const untouched = await client(app, other.token).create({ url: url(8) })
      t.equal(untouched.statusCode, 201)
      t.equal(quotaHeaders(untouched).limit, '1000', 'other workspaces keep the defaults')
    })

    t.test('official tokens are limited too', async (t) => {
      clock.set(T0)
      const ws = await quotaWorkspace(prisma, `${store} official`, { hour: 2, day: 10 }, { official: true })
      const api = client(app, ws.token)
      t.equal((await api.create({ url: url(1), domain: 'official.test' })).statusCode, 201)
      t.equal((await api.create({ url: url(2) })).statusCode, 201)
      const refused = await api.create({ url: url(3), domain: 'official.test' })
      t.equal(refused.statusCode, 429)
      t.equal(json(refused).code, 'rate_limited')
    })
  })
}
