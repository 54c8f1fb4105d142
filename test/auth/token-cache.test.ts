/**
 * Tokens are cached per instance (src/plugins/auth.ts): a token revoked elsewhere (another instance's command
 * line, plain SQL) is refused by every instance within CACHE_TTL_MS; revoked through this process, at once.
 */
import t from 'tap'
import { CACHE_TTL_MS } from '../../src/cache/change-notices.js'
import { hashToken } from '../../src/auth/tokens.js'
import { TtlCache } from '../../src/cache/ttl-cache.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'

t.test('two instances refuse a token revoked elsewhere within one second', async (t) => {
  let now = 1_000_000
  const clock = () => now
  const first = await buildTestApp(t, { tokenCache: { now: clock } })
  const second = await buildTestApp(t, { database: first.database, tokenCache: { now: clock } })
  const token = await createWorkspaceToken(first.prisma, { workspace: 'twins', defaultDomain: 'go.twins.test' })
  const get = (app: typeof first.app) =>
    app.inject({ method: 'GET', url: '/v1/links?limit=1', headers: { 'api-authorization': token } }).then((response) => response.statusCode)

  t.same([await get(first.app), await get(second.app)], [200, 200], 'both instances have read the token')
  // Revoked as another process would: straight in the database, nothing told to these instances.
  await first.database.sql('UPDATE "ApiToken" SET "revokedAt" = now() WHERE "hash" = $1', [hashToken(token)])
  now += CACHE_TTL_MS - 1
  t.same([await get(first.app), await get(second.app)], [200, 200], 'cached for less than the second')
  now += 1
  t.same([await get(first.app), await get(second.app)], [401, 401], 'refused by both once the second has passed')
  t.ok(CACHE_TTL_MS <= 1000)
})

t.test('a read held up for longer than the cache lifetime is not joined: a request after it reads again', async (t) => {
  let clock = 0
  const cache = new TtlCache<string, string>({ ttlMs: 1000, maxEntries: 10, now: () => clock })
  const reads: ((value: string) => void)[] = []
  const load = () => new Promise<string>((resolve) => reads.push(resolve))
  const first = cache.get('token', load)
  clock = 500
  const joined = cache.get('token', load)
  t.equal(reads.length, 1, 'a request within the lifetime shares the read under way')
  // The token is revoked now; the slow read had read it before.
  clock = 1500
  const later = cache.get('token', load)
  t.equal(reads.length, 2, 'a request after the lifetime reads again')
  reads[0]('valid')
  reads[1]('revoked')
  t.same(await Promise.all([first, joined, later]), ['valid', 'valid', 'revoked'])
  t.equal(await cache.get('token', load), 'revoked', 'and the newer read is what the cache keeps')
  const many = await cache.getMany(['token'], async () => new Map([['token', 'other']]))
  t.equal(many.get('token'), 'revoked')
})
