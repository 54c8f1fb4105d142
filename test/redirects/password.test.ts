/**
 * Step 3, password protection: the form, a wrong password (401), the right one (302 onwards and a signed cookie
 * that spares the form for 24 hours, for that link and its current password only), and the limit of 10 wrong
 * tries per link and address in 15 minutes (429), shared by every instance through Redis.
 */
import { createHmac } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { rawRequest } from '../support/raw-http.js'
import { MAX_MEMORY_PAIRS, MemoryPasswordThrottle, PASSWORD_WINDOW_MS, RedisPasswordThrottle } from '../../src/redirects/password-throttle.js'
import { closeRedisClient, createRedisClient, firstConnection } from '../../src/redis/redis-client.js'
import { TcpProxy } from '../support/tcp-proxy.js'
import { freePort, REDIS_URL, redisKeyPrefix } from '../rate-limits/quota-support.js'
import type { Visit } from '../../src/redirects/visits.js'
import { buildTestApp, json } from '../support/test-app.js'
import { acmeWorkspace, DESKTOP, pageHeaders, postPassword, visit } from './visit-support.js'

const SECRET = 'a-cookie-secret-of-at-least-32-characters'
const T = Date.UTC(2031, 0, 1, 9, 0, 0)
let now = T
const clock = { now: () => now }
const recorded: Visit[] = []
const first = await buildTestApp(t, { env: { COOKIE_SECRET: SECRET }, redirects: { ...clock, visits: { record: (visit) => void recorded.push(visit) } } })
const { app, database } = first
const { api, link } = await acmeWorkspace(first)
t.beforeEach(() => {
  now = T
})

const PAGE = { type: 'text/html; charset=utf-8', cacheControl: 'private, no-store', hasCsp: true, location: undefined }
const protectedLink = (id: string, extra: Record<string, unknown> = {}) =>
  link({ id, url: `https://example.com/${id}`, passwordProtect: { enable: true, password: 'open sesame' }, ...extra })
const cookieOf = (setCookie: unknown) => String(setCookie).split(';')[0]
let addresses = 0
const nextAddress = () => `192.0.2.${++addresses}`

t.test('a wrong password: 401, the form again with a message, no cookie', async (t) => {
  await protectedLink('wrong')
  const response = await postPassword(app, '/wrong', 'guess')
  t.match(pageHeaders(response), { status: 401, ...PAGE })
  t.match(response.body, /<form method="post"/)
  t.match(response.body, /not right/)
  t.equal(response.headers['set-cookie'], undefined)
})

t.test('the right password: 302 onwards with a signed, HttpOnly, SameSite=Lax cookie for that link for 24 h', async (t) => {
  const created = await protectedLink('right')
  const response = await postPassword(app, '/right?ref=mail', 'open sesame')
  t.equal(response.statusCode, 302)
  t.equal(response.headers.location, 'https://example.com/right?ref=mail')
  t.equal(response.headers['cache-control'], 'private, max-age=0')
  const setCookie = String(response.headers['set-cookie'])
  const expiry = Math.floor(T / 1000) + 86400
  const stored = await first.prisma.link.findUniqueOrThrow({ where: { uniq: created.uniq } })
  const signature = createHmac('sha256', SECRET).update(`${created.uniq}.${expiry}.${stored.passwordHash}`).digest('base64url')
  // Named for the link, for the whole short domain: a path would hold only for the slug's spelling typed.
  t.equal(setCookie, `sl_access_${created.uniq}=${created.uniq}.${expiry}.${signature}; Max-Age=86400; Path=/; HttpOnly; SameSite=Lax`)

  const again = await visit(app, '/right', { headers: { cookie: `other=1; ${cookieOf(setCookie)}` } })
  t.equal(again.statusCode, 302, 'the cookie spares the form')
  t.equal(again.headers.location, 'https://example.com/right')
  t.equal((await visit(app, '/right')).statusCode, 200, 'without it, the form')
})

t.test('behind a trusted proxy that says https, the cookie is Secure', async (t) => {
  await protectedLink('secure')
  const { app: proxied } = await buildTestApp(t, { database, env: { COOKIE_SECRET: SECRET, TRUST_PROXY: '127.0.0.1' }, redirects: clock })
  await proxied.redirects.domains.refresh()
  const response = await proxied.inject({
    method: 'POST', url: '/secure', payload: 'password=open+sesame',
    headers: { host: 'go.acme.test', 'user-agent': DESKTOP, 'x-forwarded-proto': 'https', 'content-type': 'application/x-www-form-urlencoded' },
  })
  t.equal(response.statusCode, 302)
  t.match(String(response.headers['set-cookie']), /; Secure$/)
  // A scheme is case-insensitive, whatever case the proxy sends it in.
  for (const proto of ['HTTPS', 'Https']) {
    const shouted = await proxied.inject({
      method: 'POST', url: '/secure', payload: 'password=open+sesame',
      headers: { host: 'go.acme.test', 'user-agent': DESKTOP, 'x-forwarded-proto': proto, 'content-type': 'application/x-www-form-urlencoded' },
    })
    t.match(String(shouted.headers['set-cookie']), /; Secure$/, proto)
  }
  const plain = await proxied.inject({
    method: 'POST', url: '/secure', payload: 'password=open+sesame',
    headers: { host: 'go.acme.test', 'user-agent': DESKTOP, 'x-forwarded-proto': 'http', 'content-type': 'application/x-www-form-urlencoded' },
  })
  t.notMatch(String(plain.headers['set-cookie']), /Secure/, 'over http, not Secure')
})

t.test('the cookie ends after 24 hours', async (t) => {
  await protectedLink('day')
  const cookie = cookieOf((await postPassword(app, '/day', 'open sesame')).headers['set-cookie'])
  now = T + 86_400_000 - 1000
  t.equal((await visit(app, '/day', { headers: { cookie } })).statusCode, 302, 'a second before')
  now = T + 86_400_000
  const expired = await visit(app, '/day', { headers: { cookie } })
  t.equal(expired.statusCode, 200, 'at 24 h: the form again')
  t.match(expired.body, /<form method="post"/)
})

t.test('a new password voids the cookies given before', async (t) => {
  const created = await protectedLink('changed')
  const cookie = cookieOf((await postPassword(app, '/changed', 'open sesame')).headers['set-cookie'])
  t.equal((await visit(app, '/changed', { headers: { cookie } })).statusCode, 302)
  t.equal((await api.update(created.uniq, { passwordProtect: { enable: true, password: 'new secret' } })).statusCode, 200)
  t.equal((await visit(app, '/changed', { headers: { cookie } })).statusCode, 200, 'the old cookie no longer opens it')
  t.equal((await postPassword(app, '/changed', 'open sesame')).statusCode, 401, 'nor does the old password')
  t.equal((await postPassword(app, '/changed', 'new secret')).statusCode, 302)
})

t.test('with a cookie that opens the link, a form posted again (back, reload) answers as the visit would: no password checked or counted', async (t) => {
  await protectedLink('posted-again')
  const address = nextAddress()
  const cookie = cookieOf((await postPassword(app, '/posted-again', 'open sesame', { remoteAddress: address })).headers['set-cookie'])
  for (let i = 0; i < 11; i++) {
    const again = await postPassword(app, '/posted-again?from=history', 'a typo', { cookie, remoteAddress: address })
    t.equal(again.statusCode, 302, `post ${i + 1}`)
    t.equal(again.headers.location, 'https://example.com/posted-again?from=history')
    t.equal(again.headers['set-cookie'], undefined)
  }
  // None of those was a try: from the same address, without the cookie, a wrong password is 401, not 429.
  const wrong = await postPassword(app, '/posted-again', 'a typo', { remoteAddress: address })
  t.equal(wrong.statusCode, 401)
  t.match(wrong.body, /not right/)
})

t.test('a cookie opens its own link only, and only as signed', async (t) => {
  const a = await protectedLink('first-link')
  const b = await protectedLink('second-link')
  const cookie = cookieOf((await postPassword(app, '/first-link', 'open sesame')).headers['set-cookie'])
  t.equal((await visit(app, '/second-link', { headers: { cookie } })).statusCode, 200, 'another link asks for its own password')
  const both = `${cookie}; ${cookieOf((await postPassword(app, '/second-link', 'open sesame')).headers['set-cookie'])}`
  t.equal((await visit(app, '/first-link', { headers: { cookie: both } })).statusCode, 302, 'two links unlocked: both cookies kept, each opens its own')
  t.equal((await visit(app, '/SECOND-LINK', { headers: { cookie: both } })).statusCode, 302)
  const [, expiry, signature] = cookie.split('=')[1].split('.')
  const forged = [
    `sl_access_${b.uniq}=${b.uniq}.${expiry}.${signature}`,
    `sl_access_${a.uniq}=${b.uniq}.${expiry}.${signature}`,
    `sl_access_${a.uniq}=${a.uniq}.${Number(expiry) + 86400}.${signature}`,
    // The first character: all six of its bits are the signature's (the last one's low bits are padding).
    `sl_access_${a.uniq}=${a.uniq}.${expiry}.${signature.startsWith('A') ? 'B' : 'A'}${signature.slice(1)}`,
    `sl_access_${a.uniq}=${a.uniq}.${expiry}`,
    `sl_access_${a.uniq}=${a.uniq}.${expiry}.${signature}.x`,
    `sl_access_${a.uniq}=`,
    `sl_access=${a.uniq}.${expiry}.${signature}`,
  ]
  for (const value of forged) t.equal((await visit(app, '/first-link', { headers: { cookie: value } })).statusCode, 200, value)

  const { app: sameSecret } = await buildTestApp(t, { database, env: { COOKIE_SECRET: SECRET }, redirects: clock })
  const { app: otherSecret } = await buildTestApp(t, { database, env: { COOKIE_SECRET: 'another-secret-of-at-least-32-characters' }, redirects: clock })
  const { app: noSecret } = await buildTestApp(t, { database, redirects: clock })
  for (const instance of [sameSecret, otherSecret, noSecret]) await instance.redirects.domains.refresh()
  t.equal((await visit(sameSecret, '/first-link', { headers: { cookie } })).statusCode, 302, 'an instance with the same COOKIE_SECRET accepts it')
  t.equal((await visit(otherSecret, '/first-link', { headers: { cookie } })).statusCode, 200, 'another secret does not')
  t.equal((await visit(noSecret, '/first-link', { headers: { cookie } })).statusCode, 200, 'nor a key of its own')
})

t.test('after the right password, a link that shows a page sends the visitor back to its own address, which shows it', async (t) => {
  for (const [id, extra, expected] of [
    ['masked-secret', { masking: true }, /<iframe src="https:\/\/example\.com\/masked-secret\?ref=mail"/],
    ['pixel-secret', { pixels: [{ platform: 'ga', value: 'G-SECRET' }] }, /G-SECRET/],
  ] as const) {
    await protectedLink(id, extra)
    const recordedBefore = recorded.length
    const response = await postPassword(app, `/${id}?ref=mail`, 'open sesame')
    t.equal(response.statusCode, 302, `${id}: the POST is answered by a redirect (a reload does not post the form again)`)
    t.equal(response.headers.location, `/${id}?ref=mail`, `${id}: to the link's own address, query and all`)
    const setCookie = String(response.headers['set-cookie'])
    t.match(setCookie, /^sl_access_\d+=/)
    t.equal(recorded.length, recordedBefore, `${id}: no visit recorded for the POST`)
    const page = await visit(app, `/${id}?ref=mail`, { headers: { cookie: cookieOf(setCookie) } })
    t.match(pageHeaders(page), { status: 200, ...PAGE }, `${id}: the GET shows the page`)
    t.match(page.body, expected)
    await new Promise((resolve) => setImmediate(resolve))
    t.equal(recorded.length, recordedBefore + 1, `${id}: and records the visit, once`)
    // The form posted again with the cookie (back, reload), whatever its password: the same redirect, no new cookie.
    const again = await postPassword(app, `/${id}?ref=mail`, 'a typo', { cookie: cookieOf(setCookie) })
    t.equal(again.statusCode, 302, `${id}: posted again with the cookie, a redirect too`)
    t.equal(again.headers.location, `/${id}?ref=mail`)
    t.equal(again.headers['set-cookie'], undefined)
    await new Promise((resolve) => setImmediate(resolve))
    t.equal(recorded.length, recordedBefore + 1, `${id}: no visit recorded for that POST either`)
  }
})

t.test('that address is the path and query only, whatever form the request target had', async (t) => {
  await protectedLink('absolute-form', { masking: true })
  const { app: listening } = await buildTestApp(t, { database, env: { COOKIE_SECRET: SECRET }, redirects: clock })
  await listening.redirects.domains.refresh()
  await listening.listen({ port: 0, host: '127.0.0.1' })
  const port = (listening.server.address() as AddressInfo).port
  const body = 'password=open+sesame'
  for (const target of ['http://go.acme.test/absolute-form?ref=mail', 'https://go.acme.test:8443/absolute-form?ref=mail']) {
    const response = await rawRequest(
      port,
      `POST ${target} HTTP/1.1\r\nHost: evil.example\r\nUser-Agent: ${DESKTOP}\r\nContent-Type: application/x-www-form-urlencoded\r\n` +
        `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    )
    t.equal(response.status, 302, target)
    t.equal(response.headers.location, '/absolute-form?ref=mail', `${target}: the visitor stays on the short domain`)
  }
})

t.test('the form shown at /<slug>/ posts there, and opens the link', async (t) => {
  await protectedLink('slashed')
  t.equal((await visit(app, '/slashed/')).statusCode, 200, 'the form')
  const wrong = await postPassword(app, '/slashed/', 'guess')
  t.equal(wrong.statusCode, 401)
  t.match(wrong.body, /not right/)
  const right = await postPassword(app, '/slashed/?ref=mail', 'open sesame')
  t.equal(right.statusCode, 302)
  t.equal(right.headers.location, 'https://example.com/slashed?ref=mail')
  t.match(String(right.headers['set-cookie']), /^sl_access_\d+=/)
})

t.test('what the form address does with other posts', async (t) => {
  await protectedLink('posts')
  const empty = await postPassword(app, '/posts', '')
  t.equal(empty.statusCode, 401)
  t.match(empty.body, /Enter the password/)
  const asJson = await app.inject({
    method: 'POST', url: '/posts', headers: { host: 'go.acme.test', 'content-type': 'application/json' }, payload: '{"password":"open sesame"}',
  })
  t.equal(asJson.statusCode, 415)
  t.equal(json(asJson).code, 'unsupported_media_type')
  t.match(json(asJson).detail, /application\/x-www-form-urlencoded/)
  const twice = await app.inject({
    method: 'POST', url: '/posts', headers: { host: 'go.acme.test', 'content-type': 'application/x-www-form-urlencoded' }, payload: 'password=a&password=b',
  })
  t.equal(twice.statusCode, 401, 'the field given twice: the form again')
  t.match(twice.body, /Send the password once/)
  // Bodies no form sends (the field's maxlength keeps a browser's well under the limit) get the API's problem answers.
  const tooLarge = await postPassword(app, '/posts', 'x'.repeat(5000))
  t.equal(tooLarge.statusCode, 413)
  t.equal((await postPassword(app, '/posts', 'x'.repeat(129))).statusCode, 401, 'longer than any password: wrong')
  // The longest password the API takes counts characters, not UTF-16 units: 128 emoji are 256 units.
  const emoji = '\u{1F600}'.repeat(128)
  await protectedLink('emoji', { passwordProtect: { enable: true, password: emoji } })
  t.equal((await postPassword(app, '/emoji', emoji)).statusCode, 302, 'the longest password the API takes opens its link')
  t.equal((await postPassword(app, '/emoji', emoji + 'x')).statusCode, 401, 'and one character more is wrong')
  t.match(pageHeaders(await postPassword(app, '/nothing', 'x')), { status: 404, ...PAGE })
  await link({ id: 'open', url: 'https://example.com/open' })
  const open = await postPassword(app, '/open', 'x')
  t.equal(open.statusCode, 302, 'a link without a password answers as its GET would')
  t.equal(open.headers.location, 'https://example.com/open')
})

t.test('password checks beyond those the service runs and queues are answered at once 503, the form again, the try not counted', async (t) => {
  await protectedLink('busy-checks')
  const { app: small } = await buildTestApp(t, {
    database,
    env: { COOKIE_SECRET: SECRET },
    redirects: { ...clock, passwordChecks: { maxRunning: 1, maxWaiting: 0 } },
  })
  await small.redirects.domains.refresh()
  // Six tries at once, from six addresses: one is checked (scrypt, about 90 ms), those that come meanwhile refused.
  const addresses = Array.from({ length: 6 }, (_, i) => `192.0.2.${201 + i}`)
  const tries = await Promise.all(addresses.map((remoteAddress) => postPassword(small, '/busy-checks', 'open sesame', { remoteAddress })))
  const statuses = tries.map((response) => response.statusCode)
  t.same(statuses.filter((status) => status !== 302 && status !== 503), [], 'each try opens the link or is refused')
  t.ok(statuses.includes(302) && statuses.includes(503), `some opened, some refused: ${statuses.join(', ')}`)
  for (const busy of tries.filter((response) => response.statusCode === 503)) {
    t.match(pageHeaders(busy), { status: 503, ...PAGE })
    t.equal(busy.headers['retry-after'], '2')
    t.match(busy.body, /<form method="post"/)
    t.match(busy.body, /Try again in a moment/)
    t.equal(busy.headers['set-cookie'], undefined)
  }
  t.equal(small.redirects.counters.checksBusy, statuses.filter((status) => status === 503).length)
  // A refused try is not one of the address's 10.
  const refusedAddress = addresses[statuses.indexOf(503)]
  t.same(await wrongTries(small, '/busy-checks', refusedAddress, 10), Array(10).fill(401), 'ten wrong tries still allowed afterwards')
})

/** Posts `count` wrong passwords from an address; returns the statuses. */
async function wrongTries(instance: typeof app, path: string, address: string, count: number): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < count; i++) statuses.push((await postPassword(instance, path, `guess ${i}`, { remoteAddress: address })).statusCode)
  return statuses
}

t.test('10 wrong tries per link and address in 15 minutes; the 11th is 429 with Retry-After, even if right', async (t) => {
  await protectedLink('guarded')
  const address = nextAddress()
  t.same(await wrongTries(app, '/guarded', address, 10), Array(10).fill(401))
  now = T + 5 * 60_000
  const refused = await postPassword(app, '/guarded', 'open sesame', { remoteAddress: address })
  t.match(pageHeaders(refused), { status: 429, ...PAGE })
  t.equal(refused.headers['retry-after'], '600', 'when the first try leaves the window')
  t.match(refused.body, /Too many wrong passwords/)
  t.equal(refused.headers['set-cookie'], undefined)
  t.equal((await postPassword(app, '/guarded', 'open sesame', { remoteAddress: nextAddress() })).statusCode, 302, 'another address may')
  t.equal((await visit(app, '/guarded', { remoteAddress: address })).statusCode, 200, 'the form itself is still shown')

  now = T + PASSWORD_WINDOW_MS
  t.equal((await postPassword(app, '/guarded', 'open sesame', { remoteAddress: address })).statusCode, 302, 'after 15 minutes, tries again')
})

t.test('the window slides, and the right password does not count', async (t) => {
  await protectedLink('sliding')
  const address = nextAddress()
  t.same(await wrongTries(app, '/sliding', address, 5), Array(5).fill(401))
  now = T + 10 * 60_000
  t.same(await wrongTries(app, '/sliding', address, 4), Array(4).fill(401))
  t.equal((await postPassword(app, '/sliding', 'open sesame', { remoteAddress: address })).statusCode, 302)
  t.same(await wrongTries(app, '/sliding', address, 2), [401, 429], 'the right one gave its try back: 10 wrong, then 429')
  t.equal((await postPassword(app, '/sliding', 'x', { remoteAddress: address })).headers['retry-after'], '300')
  now = T + PASSWORD_WINDOW_MS
  t.same(await wrongTries(app, '/sliding', address, 1), [401], 'the first five have left the window')
})

t.test('the tries are counted in Redis, shared by every instance', { skip: REDIS_URL ? false : 'REDIS_URL is not set' }, async (t) => {
  const keyPrefix = redisKeyPrefix(t)
  const env = { COOKIE_SECRET: SECRET, REDIS_URL: REDIS_URL! }
  const [a, b] = await Promise.all([0, 1].map(() => buildTestApp(t, { database, env, redirects: { ...clock, keyPrefix }, rateLimits: { keyPrefix }, idempotency: { keyPrefix }, visits: { keyPrefix } })))
  for (const instance of [a, b]) await instance.app.redirects.domains.refresh()
  await protectedLink('shared')
  const address = nextAddress()
  t.same(await wrongTries(a.app, '/shared', address, 6), Array(6).fill(401))
  t.same(await wrongTries(b.app, '/shared', address, 4), Array(4).fill(401))
  t.equal((await postPassword(a.app, '/shared', 'open sesame', { remoteAddress: address })).statusCode, 429)
  t.equal((await postPassword(b.app, '/shared', 'open sesame', { remoteAddress: address })).statusCode, 429)
})

t.test('a Redis that cannot be reached: the tries are counted in the process meanwhile', async (t) => {
  const { app: cut } = await buildTestApp(t, {
    database,
    env: { COOKIE_SECRET: SECRET, REDIS_URL: `redis://127.0.0.1:${await freePort()}` },
    redirects: clock,
  })
  await cut.redirects.domains.refresh()
  await protectedLink('no-redis')
  const address = nextAddress()
  t.same(await wrongTries(cut, '/no-redis', address, 11), [...Array(10).fill(401), 429])
})

t.test('without COOKIE_SECRET the start-up log warns that several instances need it', async (t) => {
  const warningsOf = async (env: Record<string, string>) => {
    const lines: string[] = []
    await buildTestApp(t, { database, env, logger: { level: 'warn', stream: { write: (line: string) => void lines.push(JSON.parse(line).msg) } } })
    return lines.filter((msg) => /COOKIE_SECRET/.test(msg))
  }
  t.match(await warningsOf({}), [/COOKIE_SECRET is unset.*several instances need COOKIE_SECRET set/])
  t.same(await warningsOf({ COOKIE_SECRET: SECRET }), [])
})

t.test('a try Redis counts after its deadline stays counted there: once Redis answers again it alone decides, so the tries made while it was slow still count', { skip: !REDIS_URL && 'needs REDIS_URL' }, async (t) => {
  const { proxy, url } = await TcpProxy.inFrontOf(REDIS_URL!)
  t.teardown(() => proxy.close())
  const redis = createRedisClient(url)
  t.teardown(() => closeRedisClient(redis))
  await firstConnection(redis)
  const keyPrefix = redisKeyPrefix(t)
  const throttle = new RedisPasswordThrottle(redis, { warn: () => {} } as never, keyPrefix)
  const key = `${keyPrefix}password-tries:42:192.0.2.7`

  // Redis runs each try at once; its answers arrive past the deadline (250 ms).
  proxy.delayReplies(600)
  for (let i = 0; i < 3; i++) t.match(await throttle.take(42, '192.0.2.7', Date.now()), { allowed: true }, 'counted by the fallback')
  t.equal(throttle.redisFailures, 3)
  proxy.restore()
  // The late answers arrive; the three stay counted in Redis (taking them back would let them go uncounted).
  await new Promise((resolve) => setTimeout(resolve, 1000))
  t.equal(await redis.zcard(key), 3, 'the three counted in Redis')
  t.match(await throttle.take(42, '192.0.2.7', Date.now()), { allowed: true })
  t.equal(await redis.zcard(key), 4, 'and the next with them')
})

t.test('behind TRUST_PROXY=true, an X-Forwarded-For that is no address counts as the connection it came on, not as a client of its own', async (t) => {
  await protectedLink('forwarded')
  const { app: proxied } = await buildTestApp(t, { database, env: { COOKIE_SECRET: SECRET, TRUST_PROXY: 'true' }, redirects: { ...clock, keyPrefix: `fwd-${Date.now()}:` } })
  await proxied.redirects.domains.refresh()
  const tryWith = (forwardedFor: string) =>
    proxied.inject({
      method: 'POST', url: '/forwarded', payload: 'password=guess', remoteAddress: '192.0.2.250',
      headers: { host: 'go.acme.test', 'user-agent': DESKTOP, 'x-forwarded-for': forwardedFor, 'content-type': 'application/x-www-form-urlencoded' },
    })
  const statuses: number[] = []
  for (let i = 0; i < 11; i++) statuses.push((await tryWith(`${'z'.repeat(2000)}${i}`)).statusCode)
  t.same(statuses, [...Array(10).fill(401), 429], 'eleven made-up addresses: one client, the connection\'s')
  t.equal((await tryWith('203.0.113.9')).statusCode, 401, 'a real address forwarded is a client of its own')
  // Some proxies (Azure's, IIS ARR) write the client's port too: the address is the client, whatever the port.
  const ported: number[] = []
  for (let i = 0; i < 11; i++) ported.push((await tryWith(`198.51.100.7:${5000 + i}`)).statusCode)
  t.same(ported, [...Array(10).fill(401), 429], 'one client on eleven ports')
  for (const forwarded of ['203.0.113.10:51000', '[2001:db8::5]:443', '[2001:db8::6]']) {
    t.equal((await tryWith(forwarded)).statusCode, 401, `${forwarded}: a client of its own, not the proxy`)
  }
})

t.test('the in-process count of tries stays bounded: a pair whose try was given back is forgotten, and a flood of addresses keeps the most recent', async (t) => {
  const throttle = new MemoryPasswordThrottle()
  const taken = await throttle.take(1, '192.0.2.1', T)
  t.equal(throttle.pairs, 1)
  if (taken.allowed) throttle.giveBack(1, '192.0.2.1', taken.ticket)
  t.equal(throttle.pairs, 0, 'nothing kept for a right password')
  for (let i = 0; i < MAX_MEMORY_PAIRS + 500; i++) await throttle.take(1, `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, T)
  t.equal(throttle.pairs, MAX_MEMORY_PAIRS)
})
