/**
 * While the database cannot be read, a link read before keeps redirecting (its last known view, up to 15 minutes),
 * as the README promises for an outage: before, every link stopped a minute after its last read, however busy.
 * What a change made known since is never served: invalidation removes it, past its lifetime too.
 */
import t from 'tap'
import { openDatabase } from '../../src/db/database.js'
import { LAST_KNOWN_FOR_MS } from '../../src/plugins/redirects.js'
import { LINK_TTL_MS, RedirectCache } from '../../src/redirects/redirect-cache.js'
import type { RedirectView } from '../../src/redirects/redirect-view.js'
import { TcpProxy } from '../support/tcp-proxy.js'
import { freePort } from '../rate-limits/quota-support.js'
import { buildTestApp, openTestDatabase } from '../support/test-app.js'
import { acmeWorkspace, visit } from './visit-support.js'

const view = (uniq: number, workspaceId = 1) => ({ uniq, workspaceId, size: 300 }) as RedirectView

t.test('the cache: a view past its lifetime is read again, yet kept as the last known until invalidated', async (t) => {
  let clock = 1_000_000
  let reads = 0
  const views: Record<string, RedirectView> = { l1: view(1), l2: view(2), w2: view(3, 2) }
  const cache = new RedirectCache(async (_domain, slugKey) => (reads++, views[slugKey] ?? null), { now: () => clock })
  for (const key of ['l1', 'l2', 'w2']) await cache.load('go.test', key)
  clock += LINK_TTL_MS + 1
  t.equal(cache.peek('go.test/l1'), undefined, 'past its lifetime: unknown, so a visit reads it again')
  t.match(cache.lastKnown('go.test/l1', LAST_KNOWN_FOR_MS), { uniq: 1 }, 'but still the last known view')
  t.equal(cache.lastKnown('go.test/l1', LINK_TTL_MS), undefined, 'not when asked for a younger one')
  cache.invalidate(['go.test/l1'])
  cache.invalidateLinks([2])
  cache.invalidateWorkspace(2)
  for (const key of ['l1', 'l2', 'w2']) t.equal(cache.lastKnown(`go.test/${key}`, LAST_KNOWN_FOR_MS), undefined, `${key}: invalidated, gone`)
  t.equal(reads, 3)

  // A link read again past its lifetime and found gone: its old view is no last known one.
  await cache.load('go.test', 'l1')
  clock += LINK_TTL_MS + 1
  delete views.l1
  t.equal(await cache.load('go.test', 'l1'), null, 'read again: gone')
  t.equal(cache.lastKnown('go.test/l1', LAST_KNOWN_FOR_MS), undefined, 'nothing to serve should the next read fail')
})

t.test('the database refused: links read before keep redirecting for 15 minutes; others are 503', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL (the embedded database has no connection to cut)' }, async (t) => {
  const { url } = await openTestDatabase(t)
  const { proxy, url: proxied } = await TcpProxy.inFrontOf(url!)
  t.teardown(() => proxy.close())
  const database = await openDatabase({ databaseUrl: proxied, dataDir: 'unused' })
  t.teardown(() => database.close())
  let clock = Date.now()
  const testApp = await buildTestApp(t, { database, redirects: { cache: { now: () => clock } } })
  const { app } = testApp
  const { link, api } = await acmeWorkspace(testApp)
  await link({ id: 'busy', url: 'https://example.com/busy' })
  await link({ id: 'never-visited', url: 'https://example.com/never' })
  const changed = await link({ id: 'changed', url: 'https://example.com/before' })
  for (const path of ['/busy', '/changed']) t.equal((await visit(app, path)).statusCode, 302, `${path} read once`)
  t.equal((await api.update(changed.uniq, { url: 'https://example.com/after' })).statusCode, 200)
  // An instance that cannot hear changes (its Redis is out of reach) serves nothing as last known: a change made
  // on another instance may have passed it by.
  const { app: deaf } = await buildTestApp(t, {
    database,
    env: { REDIS_URL: `redis://127.0.0.1:${await freePort()}` },
    redirects: { cache: { now: () => clock } },
  })
  await deaf.redirects.domains.refresh()
  t.equal((await visit(deaf, '/busy')).statusCode, 302)

  proxy.refuse()
  clock += LINK_TTL_MS + 1_000
  const busy = await visit(app, '/busy')
  t.equal(busy.statusCode, 302, 'a minute on, the busy link still redirects')
  t.equal(busy.headers.location, 'https://example.com/busy')
  for (const path of ['/never-visited', '/changed', '/made-up']) {
    const refused = await visit(app, path)
    t.equal(refused.statusCode, 503, `${path}: never read, changed since, or unknown: 503`)
    t.ok(refused.headers['retry-after'])
  }
  t.equal((await visit(deaf, '/busy')).statusCode, 503, 'not by an instance deaf to changes')
  clock += LAST_KNOWN_FOR_MS
  t.equal((await visit(app, '/busy')).statusCode, 503, '15 minutes on, no longer')

  proxy.restore()
  const back = await visit(app, '/busy')
  t.equal(back.statusCode, 302, 'the database back: read again')
  t.equal((await visit(app, '/changed')).headers.location, 'https://example.com/after')
})
