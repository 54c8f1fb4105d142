/**
 * The hot path's cache: one database read per cold link and none per warm visit, the bounds, the negative
 * entries, single flight, and how changes reach it: at once in the process that made them, and within a second
 * on every other instance through Redis pub/sub (two apps on one database and one Redis).
 */
import t from 'tap'
import { Redis } from 'ioredis'
import { setTimeout as sleep } from 'node:timers/promises'
import { RedirectCache } from '../../src/redirects/redirect-cache.js'
import { batchedViewReader, cacheKey, loadRedirectViews, type RedirectView } from '../../src/redirects/redirect-view.js'
import { freePort, REDIS_URL, redisKeyPrefix } from '../rate-limits/quota-support.js'
import { within } from '../support/polling.js'
import { TcpProxy } from '../support/tcp-proxy.js'
import { buildTestApp, client, type TestApp } from '../support/test-app.js'
import { acmeWorkspace, SHORT_DOMAIN, visit } from './visit-support.js'

/** Every Redis key of an app under the test's prefix: counters left by one run must not count in the next. */
const ownKeys = (keyPrefix: string) => ({ redirects: { keyPrefix }, rateLimits: { keyPrefix }, idempotency: { keyPrefix }, visits: { keyPrefix } })

const first = await buildTestApp(t)
const { app, database } = first
const { api, token, link } = await acmeWorkspace(first)

const location = async (instance: typeof app, path: string) => {
  const response = await visit(instance, path)
  return response.statusCode === 302 ? response.headers.location : response.statusCode
}

t.test('a warm link costs no database read; a change through the API is seen at once', async (t) => {
  const created = await link({ id: 'warm', url: 'https://example.com/v1' })
  const before = app.redirects.cache.reads
  for (let i = 0; i < 5; i++) t.equal(await location(app, '/warm'), 'https://example.com/v1')
  t.equal(app.redirects.cache.reads - before, 1, 'one read for five visits')

  t.equal((await api.update(created.uniq, { url: 'https://example.com/v2' })).statusCode, 200)
  t.equal(await location(app, '/warm'), 'https://example.com/v2', 'updated')
  const deleted = await app.inject({ method: 'DELETE', url: `/v1/links/${created.uniq}`, headers: { 'api-authorization': token } })
  t.equal(deleted.statusCode, 204)
  t.equal(await location(app, '/warm'), 404, 'deleted')
  await link({ id: 'warm', url: 'https://example.com/v3' })
  t.equal(await location(app, '/warm'), 'https://example.com/v3', 'created again: the remembered 404 is gone')
  t.equal(await location(app, '/WARM'), 'https://example.com/v3')
})

t.test('concurrent visits of a cold link share one read', async (t) => {
  await link({ id: 'crowd', url: 'https://example.com/crowd' })
  const before = app.redirects.cache.reads
  const responses = await Promise.all(Array.from({ length: 20 }, () => visit(app, '/crowd')))
  t.same(new Set(responses.map((response) => response.headers.location)), new Set(['https://example.com/crowd']))
  t.equal(app.redirects.cache.reads - before, 1)
})

t.test('bounded: the least recently used link makes room; unknown slugs cannot push links out', async (t) => {
  const { app: small } = await buildTestApp(t, { database, redirects: { cache: { maxEntries: 2, maxMissing: 5 } } })
  await small.redirects.domains.refresh()
  await link({ id: 'one' })
  await link({ id: 'two' })
  await link({ id: 'three' })
  for (const path of ['/one', '/two']) await visit(small, path)
  for (let i = 0; i < 50; i++) t.equal((await visit(small, `/unknown-${i}`)).statusCode, 404)
  let reads = small.redirects.cache.reads
  for (const path of ['/one', '/two']) await visit(small, path)
  t.equal(small.redirects.cache.reads - reads, 0, 'both links still cached after 50 unknown slugs')
  await visit(small, '/three')
  reads = small.redirects.cache.reads
  await visit(small, '/one')
  t.equal(small.redirects.cache.reads - reads, 1, '/one, the least recently used, was dropped for /three')
  t.ok(small.redirects.cache.size <= 2)
})

t.test('a large view counts for its size', async (t) => {
  const created = await app.inject({
    method: 'POST', url: '/v1/scripts', headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload: { name: 'Big', content: `<script>${'x'.repeat(60_000)}</script>` },
  })
  await link({ id: 'big-script', linkScripts: [created.json().id], linkScriptEnable: true })
  const { app: small } = await buildTestApp(t, { database, redirects: { cache: { maxBytes: 100_000 } } })
  await small.redirects.domains.refresh()
  t.equal((await visit(small, '/big-script')).statusCode, 200)
  t.equal((await visit(small, '/crowd')).statusCode, 302)
  t.equal(small.redirects.cache.size, 1, 'the second link took the place of the 120 KB one')
})

t.test('unknown slugs are remembered briefly', async (t) => {
  // (lru-cache takes a start time of 0 for "no start": the clock starts later.)
  let clock = 1_000_000
  const { app: timed } = await buildTestApp(t, { database, redirects: { cache: { now: () => clock, missingTtlMs: 10_000 } } })
  await timed.redirects.domains.refresh()
  await visit(timed, '/later')
  // Created behind this instance's back (as by another instance without Redis): still 404 while remembered.
  await first.prisma.link.create({
    data: { workspaceId: 1, domain: 'go.acme.test', slug: 'later', slugKey: 'later', url: 'https://example.com/later' },
  })
  t.equal((await visit(timed, '/later')).statusCode, 404)
  clock += 10_001
  t.equal(await location(timed, '/later'), 'https://example.com/later', 'read again once forgotten')
})

t.test('a read under way when a change arrives answers its visit but is not kept', async (t) => {
  const reads: ((view: RedirectView | null) => void)[] = []
  const cache = new RedirectCache(() => new Promise((resolve) => reads.push(resolve)))
  const view = { uniq: 1, workspaceId: 1, size: 100 } as RedirectView
  const loading = cache.load('go.acme.test', 'race')
  cache.invalidate(['go.acme.test/race'])
  const after = cache.load('go.acme.test', 'race')
  t.equal(reads.length, 2, 'a visit after the change does not join the earlier read')
  reads[0](view)
  t.equal(await loading, view)
  t.equal(cache.peek('go.acme.test/race'), undefined, 'not kept')
  reads[1](view)
  await after
  t.equal(cache.peek('go.acme.test/race'), view, 'the read begun after the change is kept')
})

t.test('a workspace\'s pixel or script change drops that workspace\'s links only', async (t) => {
  const views = [
    { uniq: 1, workspaceId: 1, size: 1 },
    { uniq: 2, workspaceId: 2, size: 1 },
  ] as RedirectView[]
  const cache = new RedirectCache(async (_domain, slug) => views[Number(slug) - 1])
  await cache.load('d', '1')
  await cache.load('d', '2')
  cache.invalidateWorkspace(1)
  t.equal(cache.peek('d/1'), undefined)
  t.equal(cache.peek('d/2'), views[1])
})

t.test('two instances on one Redis: an update or delete on one is served fresh by the other within a second', { skip: REDIS_URL ? false : 'REDIS_URL is not set' }, async (t) => {
  const keyPrefix = redisKeyPrefix(t)
  const env = { REDIS_URL: REDIS_URL! }
  const [a, b]: TestApp[] = await Promise.all([0, 1].map(() => buildTestApp(t, { database, env, ...ownKeys(keyPrefix) })))
  for (const instance of [a, b]) await instance.app.redirects.domains.refresh()
  t.not(await within(2000, async () => a.app.redirects.channel.live && b.app.redirects.channel.live), null, 'both subscribed')
  const onA = client(a.app, token)

  const created = json201(await onA.create({ domain: 'go.acme.test', id: 'shared', url: 'https://example.com/one' }, { autofill: false }))
  t.equal(await location(b.app, '/shared'), 'https://example.com/one')
  t.equal(await location(b.app, '/shared'), 'https://example.com/one', 'warm on B')

  t.equal((await onA.update(created.uniq, { url: 'https://example.com/two' })).statusCode, 200)
  const updated = await within(1000, async () => (await location(b.app, '/shared')) === 'https://example.com/two')
  t.not(updated, null, `B serves the update (after ${updated} ms)`)

  const deleted = await a.app.inject({ method: 'DELETE', url: `/v1/links/${created.uniq}`, headers: { 'api-authorization': token } })
  t.equal(deleted.statusCode, 204)
  const gone = await within(1000, async () => (await location(b.app, '/shared')) === 404)
  t.not(gone, null, `B serves the delete (after ${gone} ms)`)

  t.equal(await location(b.app, '/fresh-slug'), 404, 'B remembers a 404')
  json201(await onA.create({ domain: 'go.acme.test', id: 'fresh-slug', url: 'https://example.com/fresh' }, { autofill: false }))
  const appeared = await within(1000, async () => (await location(b.app, '/fresh-slug')) === 'https://example.com/fresh')
  t.not(appeared, null, `B serves the new link (after ${appeared} ms)`)

  const script = await a.app.inject({
    method: 'POST', url: '/v1/scripts', headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload: { name: 'Shared', content: '<script>window.version = 1</script>' },
  })
  json201(await onA.create({ domain: 'go.acme.test', id: 'scripted-shared', linkScripts: [script.json().id], linkScriptEnable: true, url: 'https://example.com/s' }, { autofill: false }))
  t.match((await visit(b.app, '/scripted-shared')).body, /window\.version = 1/)
  const changed = await a.app.inject({
    method: 'PUT', url: `/v1/scripts/${script.json().id}`, headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload: { content: '<script>window.version = 2</script>' },
  })
  t.equal(changed.statusCode, 200)
  const newContent = await within(1000, async () => /window\.version = 2/.test((await visit(b.app, '/scripted-shared')).body))
  t.not(newContent, null, `B serves the script's new content (after ${newContent} ms)`)
})

t.test('two instances on one Redis: links a failed write may have changed, named by uniq, are forgotten by the other too', { skip: REDIS_URL ? false : 'REDIS_URL is not set' }, async (t) => {
  const keyPrefix = redisKeyPrefix(t)
  const env = { REDIS_URL: REDIS_URL! }
  const [a, b]: TestApp[] = await Promise.all([0, 1].map(() => buildTestApp(t, { database, env, ...ownKeys(keyPrefix) })))
  for (const instance of [a, b]) await instance.app.redirects.domains.refresh()
  t.not(await within(2000, async () => a.app.redirects.channel.live && b.app.redirects.channel.live), null, 'both subscribed')
  const created = json201(await client(a.app, token).create({ domain: 'go.acme.test', id: 'uncertain', url: 'https://example.com/before' }, { autofill: false }))
  t.equal(await location(b.app, '/uncertain'), 'https://example.com/before', 'cached on B')
  // As a write that reached the database but failed to answer: the row changed, no change was announced.
  await database.prisma.link.update({ where: { uniq: created.uniq }, data: { url: 'https://example.com/after' } })
  t.equal(await location(b.app, '/uncertain'), 'https://example.com/before', 'B still serves its cached copy')
  a.app.redirects.linksUncertain([{ uniq: created.uniq }])
  const seen = await within(1000, async () => (await location(b.app, '/uncertain')) === 'https://example.com/after')
  t.not(seen, null, `B reads the link again (after ${seen} ms)`)
})

t.test('the links changed in one turn of the event loop go to the other instances in one message', { skip: REDIS_URL ? false : 'REDIS_URL is not set' }, async (t) => {
  const keyPrefix = redisKeyPrefix(t)
  const { app: sender } = await buildTestApp(t, { database, env: { REDIS_URL: REDIS_URL! }, ...ownKeys(keyPrefix) })
  const listener = new Redis(REDIS_URL!)
  t.teardown(() => listener.quit())
  const messages: { keys?: string[]; from?: string }[] = []
  listener.on('message', (_channel: string, text: string) => messages.push(JSON.parse(text)))
  await listener.subscribe(`${keyPrefix}redirects:changes`)

  for (const slug of ['one', 'Two', 'three']) sender.redirects.linksChanged([{ domain: 'go.acme.test', slug }])
  await sleep(0)
  sender.redirects.linksChanged([{ domain: 'go.acme.test', slug: 'later' }])
  t.not(await within(2000, async () => messages.length >= 2), null, 'both messages arrived')
  await sleep(50)
  t.same(messages.map((message) => message.keys), [
    ['go.acme.test/one', 'go.acme.test/two', 'go.acme.test/three'],
    ['go.acme.test/later'],
  ])
})

t.test('a change channel that goes silent without closing is noticed: an update is still seen within about a second', { skip: REDIS_URL ? false : 'REDIS_URL is not set' }, async (t) => {
  // B reaches Redis through a proxy that stops passing Redis's answers on (a frozen server, a path that drops
  // packets): no error arrives, the connection stays open, and B hears nothing. It took 3.3 s before.
  const keyPrefix = redisKeyPrefix(t)
  const { proxy, url: proxied } = await TcpProxy.inFrontOf(REDIS_URL!)
  t.teardown(() => proxy.close())
  const a = await buildTestApp(t, { database, env: { REDIS_URL: REDIS_URL! }, ...ownKeys(keyPrefix) })
  const b = await buildTestApp(t, { database, env: { REDIS_URL: proxied }, ...ownKeys(keyPrefix) })
  for (const instance of [a, b]) await instance.app.redirects.domains.refresh()
  t.not(await within(2000, async () => a.app.redirects.channel.live && b.app.redirects.channel.live), null, 'both subscribed')
  const created = json201(await client(a.app, token).create({ domain: 'go.acme.test', id: 'frozen', url: 'https://example.com/one' }, { autofill: false }))
  // The create's own change notice may reach B while B reads the link, and a read under way when a change arrives
  // is not kept: visit until B answers from its cache, or the update below would be read fresh whatever B heard.
  const cachedOnB = await within(2000, async () => {
    const reads = b.app.redirects.cache.reads
    return (await location(b.app, '/frozen')) === 'https://example.com/one' && b.app.redirects.cache.reads === reads
  })
  t.not(cachedOnB, null, 'cached on B')

  proxy.holdReplies()
  await sleep(100)
  t.equal((await client(a.app, token).update(created.uniq, { url: 'https://example.com/two' }, { autofill: false })).statusCode, 200)
  const seen = await within(3000, async () => (await location(b.app, '/frozen')) === 'https://example.com/two')
  t.not(seen, null, 'B serves the update')
  t.ok(seen !== null && seen <= 1300, `within about a second (${seen} ms)`)
  t.equal(b.app.redirects.channel.live, false, 'B knows it hears nothing')
  proxy.restore()
})

t.test('while the change channel is down, nothing cached is trusted for more than a second', async (t) => {
  let clock = 1_000_000
  const { app: cut } = await buildTestApp(t, {
    database,
    env: { REDIS_URL: `redis://127.0.0.1:${await freePort()}` },
    redirects: { cache: { now: () => clock } },
  })
  await cut.redirects.domains.refresh()
  t.equal(cut.redirects.channel.live, false)
  await link({ id: 'blind', url: 'https://example.com/blind' })
  await visit(cut, '/blind')
  const reads = cut.redirects.cache.reads
  clock += 1000
  await visit(cut, '/blind')
  t.equal(cut.redirects.cache.reads - reads, 0, 'a second old: still used')
  clock += 1
  t.equal(await location(cut, '/blind'), 'https://example.com/blind')
  t.equal(cut.redirects.cache.reads - reads, 1, 'older: read again')
})

function json201(response: { statusCode: number; body: string; json(): any }) {
  if (response.statusCode !== 201) throw new Error(`${response.statusCode} ${response.body}`)
  return response.json()
}

t.test('the links asked for in one turn of the event loop are read with one statement', async (t) => {
  const statements: string[][] = []
  let failing = false
  const read = batchedViewReader(async (keys) => {
    statements.push(keys.map((key) => cacheKey(key.domain, key.slugKey)))
    if (failing) throw new Error('database down')
    return new Map(keys.filter((key) => key.slugKey !== 'missing').map((key) => [cacheKey(key.domain, key.slugKey), { uniq: 1 } as RedirectView]))
  }, { maxBatch: 3 })
  const views = await Promise.all([read('d', 'a'), read('d', 'missing'), read('e', 'a')])
  t.same(statements, [['d/a', 'd/missing', 'e/a']])
  t.same(views, [{ uniq: 1 }, null, { uniq: 1 }])

  statements.length = 0
  await Promise.all(['a', 'b', 'c', 'd', 'e'].map((slug) => read('d', slug)))
  t.same(statements, [['d/a', 'd/b', 'd/c'], ['d/d', 'd/e']], 'at most maxBatch per statement')

  // While the statements allowed at once are under way, the links asked for wait and go in one statement.
  statements.length = 0
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  const slow = batchedViewReader(async (keys) => {
    statements.push(keys.map((key) => cacheKey(key.domain, key.slugKey)))
    await gate
    return new Map()
  }, { maxBatch: 64, maxInFlight: 1 })
  const first = slow('d', 'first')
  await new Promise((resolve) => setImmediate(resolve))
  const later = ['a', 'b', 'c'].map((slug) => slow('d', slug))
  await new Promise((resolve) => setImmediate(resolve))
  t.same(statements, [['d/first']], 'the others wait while the one statement allowed is under way')
  release()
  t.same(await Promise.all([first, ...later]), [null, null, null, null])
  t.same(statements, [['d/first'], ['d/a', 'd/b', 'd/c']], 'and then go together')

  statements.length = 0
  failing = true
  const results = await Promise.allSettled([read('d', 'x'), read('d', 'y')])
  t.same(results.map((result) => result.status), ['rejected', 'rejected'], 'a failed statement fails each of its visits')
})

t.test('a read of any number of links finds each that exists, once, and no other', async (t) => {
  // The statement has one text per power of two of keys, the rest padded: every size from 1 to past the largest
  // batch, with unknown slugs, a slug in another case's key, and a key asked twice.
  const urls = new Map<string, string>()
  for (let i = 0; i < 70; i++) {
    const created = await link({ id: `many${i}`, url: `https://example.com/many/${i}` })
    urls.set(cacheKey(SHORT_DOMAIN, created.id.toLowerCase()), created.url)
  }
  const known = [...urls.keys()].map((key) => ({ domain: SHORT_DOMAIN, slugKey: key.slice(SHORT_DOMAIN.length + 1) }))
  for (const size of [1, 2, 3, 5, 8, 17, 64, 65, 70]) {
    const keys = known.slice(0, size)
    const asked = [...keys, { domain: SHORT_DOMAIN, slugKey: 'nobody' }, { domain: 'elsewhere.test', slugKey: keys[0].slugKey }, keys[0]]
    const views = await loadRedirectViews(database, asked)
    t.same([...views.keys()].sort(), keys.map((key) => cacheKey(key.domain, key.slugKey)).sort(), `${size} keys: those that exist`)
    t.ok(keys.every((key) => views.get(cacheKey(key.domain, key.slugKey))?.target.url === urls.get(cacheKey(key.domain, key.slugKey))), `${size} keys: each its own link`)
  }
  t.same(await loadRedirectViews(database, []), new Map(), 'no keys, no links')
})
