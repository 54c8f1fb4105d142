/** Contract section 2: tokens, workspace isolation, the bad-token throttle, and what never reaches a log. */
import { Writable } from 'node:stream'
import t from 'tap'
import { BadTokenThrottle, MAX_TRACKED_ADDRESSES, RedisFailureCount } from '../../src/auth/bad-token-throttle.js'
import { REDIS_URL, redisKeyPrefix } from '../rate-limits/quota-support.js'
import { hashToken } from '../../src/auth/tokens.js'
import { revokeToken } from '../../src/workspaces/workspace-repository.js'
import { buildTestApp, client, createWorkspaceToken } from '../support/test-app.js'

const logLines: string[] = []
const logStream = new Writable({
  write(chunk, _encoding, done) {
    logLines.push(chunk.toString())
    done()
  },
})
const { app, prisma } = await buildTestApp(t, { logger: { level: 'trace', stream: logStream } })
const aliceToken = await createWorkspaceToken(prisma, { workspace: 'alice', defaultDomain: 'go.alice.test' })
const bobToken = await createWorkspaceToken(prisma, { workspace: 'bob', defaultDomain: 'go.bob.test' })
const alice = client(app, aliceToken)
const bob = client(app, bobToken)

t.test('missing, unknown and revoked tokens get 401', async (t) => {
  const { token: revoked } = await import('../../src/workspaces/workspace-repository.js').then((m) =>
    m.createToken(prisma, { workspace: 'alice', label: 'to revoke' }),
  )
  t.equal((await client(app, revoked).create({ url: 'https://example.com/' })).statusCode, 201, 'works before revocation')
  await revokeToken(prisma, revoked)
  for (const headers of [{}, { 'api-authorization': 'sl_not-a-real-token' }, { 'api-authorization': revoked }, { 'api-authorization': '' }]) {
    const response = await app.inject({
      method: 'POST',
      url: '/v1/links/create',
      headers: { 'content-type': 'application/json', ...headers },
      payload: { link: { url: 'https://example.com/' } },
    })
    t.equal(response.statusCode, 401)
    t.match(response.json(), { code: 'unauthorized', status: 401 })
  }
})

t.test('tokens are stored only as SHA-256 hashes with a display prefix', async (t) => {
  const rows = await prisma.apiToken.findMany()
  t.ok(rows.length >= 2)
  for (const row of rows) {
    t.match(row.hash, /^[0-9a-f]{64}$/)
    t.equal(row.prefix.length, 11)
  }
  t.ok(rows.some((row) => row.hash === hashToken(aliceToken)))
  t.notOk(JSON.stringify(rows).includes(aliceToken))
})

t.test("another workspace's link behaves exactly as if it did not exist", async (t) => {
  const link = (await alice.create({ url: 'https://example.com/', id: 'mine' })).json()
  const byUniq = await bob.update(link.uniq, { title: 'stolen' })
  const byDomain = await bob.updateByDomain('go.alice.test', 'mine', { title: 'stolen' })
  const missing = await bob.update(99999, { title: 'x' })
  for (const response of [byUniq, byDomain]) {
    t.equal(response.statusCode, 404)
    t.same(response.json(), missing.json(), 'the same answer as a link that does not exist')
  }
  t.equal((await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).title, null)
})

t.test('more than 30 bad tokens from one address in a minute get 429 until the minute has passed', async (t) => {
  let now = 1_000_000
  const throttled = await buildTestApp(t, { throttle: new BadTokenThrottle({ limit: 30, windowMs: 60_000, now: () => now }) })
  const good = await createWorkspaceToken(throttled.prisma, { workspace: 'w', defaultDomain: 'go.w.test' })
  const attempt = (token: string, remoteAddress = '203.0.113.7') =>
    throttled.app.inject({
      method: 'POST',
      url: '/v1/links/create',
      remoteAddress,
      headers: { 'api-authorization': token, 'content-type': 'application/json' },
      payload: { link: { url: 'https://example.com/' } },
    })
  for (let i = 1; i <= 30; i++) t.equal((await attempt(`sl_guess${i}`)).statusCode, 401, `guess ${i}`)
  const limited = await attempt('sl_guess31')
  t.equal(limited.statusCode, 429)
  t.equal(limited.json().code, 'rate_limited')
  t.equal(limited.headers['retry-after'], '60')
  t.equal((await attempt(good)).statusCode, 429, 'even a right token: a lucky guess cannot be told apart')
  t.equal((await attempt(good, '198.51.100.1')).statusCode, 201, 'other addresses are not affected')
  now += 59_000
  t.equal((await attempt(good)).headers['retry-after'], '1')
  now += 1_000
  t.equal((await attempt(good)).statusCode, 201, 'after the minute the address may try again')
})

t.test('with Redis, an address gets 30 bad tokens a minute across all instances, not 30 on each', { skip: !REDIS_URL && 'needs REDIS_URL' }, async (t) => {
  const env = { REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: redisKeyPrefix(t) }
  const first = await buildTestApp(t, { env })
  const second = await buildTestApp(t, { env, database: first.database })
  const good = await createWorkspaceToken(first.prisma, { workspace: 'shared-throttle', defaultDomain: 'go.shared-throttle.test' })
  const attempt = (instance: typeof first, token: string, remoteAddress = '203.0.113.9') =>
    instance.app.inject({ method: 'GET', url: '/v1/links', remoteAddress, headers: { 'api-authorization': token } })
  // 15 on each, alternating: 30 in all.
  for (let i = 1; i <= 30; i++) t.equal((await attempt(i % 2 ? first : second, `sl_guess${i}`)).statusCode, 401, `guess ${i}`)
  const limited = await attempt(first, 'sl_guess31')
  t.equal(limited.statusCode, 429, 'the 31st, on an instance that saw 16')
  t.match(limited.headers['retry-after'], /^(59|60)$/)
  t.equal((await attempt(first, good)).statusCode, 429, 'then even a right token on that instance')
  t.equal((await attempt(second, 'sl_guess32')).statusCode, 429, 'the other instance refuses the next bad token too')
  t.equal((await attempt(second, good)).statusCode, 429, 'and then a right one')
  t.equal((await attempt(second, good, '198.51.100.9')).statusCode, 200, 'other addresses are not affected')
})

t.test('while Redis does not answer, each instance still counts on its own', async (t) => {
  const redis = { defineCommand() {}, badTokenCount: () => Promise.reject(new Error('Redis did not answer')) }
  const log = { warn: () => {} }
  const throttle = new BadTokenThrottle({ limit: 2, shared: new RedisFailureCount(redis as never, log as never) })
  t.equal(await throttle.recordFailure('192.0.2.9'), 0)
  t.equal(await throttle.recordFailure('192.0.2.9'), 0)
  t.ok((await throttle.recordFailure('192.0.2.9')) > 0, 'blocked by the local count')
})

t.test('an IPv4 client is one address however the listener spells it (::ffff:1.2.3.4 or 1.2.3.4)', async (t) => {
  const throttled = await buildTestApp(t, { throttle: new BadTokenThrottle({ limit: 2 }) })
  const attempt = (remoteAddress: string) =>
    throttled.app.inject({ method: 'GET', url: '/v1/links', remoteAddress, headers: { 'api-authorization': 'sl_guess' } })
  t.equal((await attempt('::ffff:198.51.100.77')).statusCode, 401)
  t.equal((await attempt('198.51.100.77')).statusCode, 401)
  t.equal((await attempt('::FFFF:198.51.100.77')).statusCode, 429, 'the third bad token of the one client')
  t.equal((await attempt('::ffff:c633:644d')).statusCode, 401, 'an IPv6 spelling that is not dotted stays as it is')
})

t.test('the throttle forgets ended windows as it goes and follows at most MAX_TRACKED_ADDRESSES addresses', async (t) => {
  let now = 0
  const throttle = new BadTokenThrottle({ limit: 2, windowMs: 60_000, now: () => now })
  // A steady stream of bad tokens from ever new addresses: only the last minute's addresses are kept.
  for (let i = 0; i < 30_000; i++) {
    now = i * 10
    void throttle.recordFailure(`10.0.${i >> 8}.${i & 255}`)
  }
  t.equal(throttle.tracked, 6_000, 'the addresses of the last 60 s (one every 10 ms), the ended ones forgotten')
  for (let i = 0; i < 3; i++) void throttle.recordFailure('192.0.2.1')
  t.ok(throttle.blockedFor('192.0.2.1') > 0, 'counting goes on')
  // Many addresses within one window: bounded.
  for (let i = 0; i < MAX_TRACKED_ADDRESSES + 50; i++) void throttle.recordFailure(`a${i}`)
  t.equal(throttle.tracked, MAX_TRACKED_ADDRESSES, 'the oldest are forgotten past the bound')
  t.equal(throttle.blockedFor('192.0.2.1'), 0, 'the oldest window went first')
  void throttle.recordFailure(`a${MAX_TRACKED_ADDRESSES + 49}`)
  void throttle.recordFailure(`a${MAX_TRACKED_ADDRESSES + 49}`)
  t.ok(throttle.blockedFor(`a${MAX_TRACKED_ADDRESSES + 49}`) > 0, 'the newest still count')
})

t.test('neither tokens nor passwords ever reach the log', async (t) => {
  const response = await alice.create({
    url: 'https://example.com/',
    passwordProtect: { enable: true, password: 'hunter2-very-secret' },
  })
  t.equal(response.statusCode, 201)
  await client(app, 'sl_wrong-token-value').create({ url: 'https://example.com/' })
  await alice.create({ url: 'not a url', passwordProtect: { enable: true, password: 'hunter2-very-secret' } })
  // Malformed JSON: JSON.parse's message quotes the body around the error, a password without its quotes included.
  const malformed = await alice.send('POST', '/v1/links/create', '{"link":{"url":"https://example.com","passwordProtect":{"enable":true,"password":hunter2-very-secret}}}')
  t.equal(malformed.json().code, 'invalid_json')
  t.notMatch(malformed.body, /hunter/, 'the problem does not quote the body')
  const log = logLines.join('')
  t.ok(log.length > 0, 'something was logged')
  t.match(log, /"reqId"/, 'log lines carry the request id')
  t.notMatch(log, /hunter/, 'no part of a password')
  for (const secret of [aliceToken, bobToken, 'sl_wrong-token-value', 'hunter2-very-secret']) {
    t.notOk(log.includes(secret), `the log does not contain ${secret.slice(0, 6)}…`)
  }
  t.notOk(response.body.includes('hunter2'), 'nor does the response')
})
