/**
 * Which requests reach the visitor side: GET/HEAD /<slug> on a short domain (a workspace's, DEFAULT_DOMAIN or a
 * reserved one; Host without port, any case; X-Forwarded-Host only from a trusted proxy), slugs in any case,
 * the API on every host, other hosts answered as before (problem+json 404), robots.txt and favicon.ico, and no
 * log line per visit.
 */
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { buildTestApp, client, createWorkspaceToken, DEFAULT_DOMAIN, json, OFFICIAL_DOMAIN } from '../support/test-app.js'
import { rawRequest } from '../support/raw-http.js'
import { acmeWorkspace, DESKTOP, pageHeaders, visit } from './visit-support.js'

const first = await buildTestApp(t)
const { app, prisma, database } = first
const { token, link } = await acmeWorkspace(first)
await link({ id: 'Summer', url: 'https://example.com/summer-sale' })

t.test('a link on a workspace domain: 302 to its url, private, no body', async (t) => {
  const response = await visit(app, '/Summer')
  t.equal(response.statusCode, 302)
  t.equal(response.headers.location, 'https://example.com/summer-sale')
  t.equal(response.headers['cache-control'], 'private, max-age=0')
  t.equal(response.body, '')
})

t.test('slugs match in any case; the Host header in any case, with a port or a final dot', async (t) => {
  for (const [host, path] of [
    ['go.acme.test', '/summer'],
    ['go.acme.test', '/SUMMER'],
    ['GO.Acme.TEST:8080', '/sUmMeR'],
    ['go.acme.test.', '/summer'],
  ]) {
    const response = await visit(app, path, { host })
    t.equal(response.statusCode, 302, `${host}${path}`)
    t.equal(response.headers.location, 'https://example.com/summer-sale')
  }
})

t.test('a slash at the end is the same link; any other path below a slug is not', async (t) => {
  for (const path of ['/summer/', '/SUMMER/?utm_source=mail']) {
    const response = await visit(app, path)
    t.equal(response.statusCode, 302, path)
    t.equal(response.headers.location, `https://example.com/summer-sale${path.includes('?') ? '?utm_source=mail' : ''}`, path)
    t.equal((await visit(app, path, { method: 'HEAD' })).statusCode, 302, `HEAD ${path}`)
  }
  for (const path of ['/summer//', '/summer/x', '/summer/x/', '/nothing-here/', '/not.a.slug/']) {
    t.equal((await visit(app, path)).statusCode, 404, path)
  }
})

t.test('DEFAULT_DOMAIN and the other reserved domains are short domains too', async (t) => {
  const official = client(app, await createWorkspaceToken(prisma, { workspace: 'official', official: true }))
  for (const domain of [DEFAULT_DOMAIN, OFFICIAL_DOMAIN]) {
    const created = await official.create({ domain, id: 'promo', url: `https://example.com/${domain}` }, { autofill: false })
    t.equal(created.statusCode, 201)
    const response = await visit(app, '/promo', { host: domain })
    t.equal(response.statusCode, 302)
    t.equal(response.headers.location, `https://example.com/${domain}`)
  }
})

t.test('HEAD answers what GET would, without a body', async (t) => {
  const redirect = await visit(app, '/summer', { method: 'HEAD' })
  t.equal(redirect.statusCode, 302)
  t.equal(redirect.headers.location, 'https://example.com/summer-sale')
  t.equal(redirect.headers['cache-control'], 'private, max-age=0')
  const missing = await visit(app, '/nothing-here', { method: 'HEAD' })
  const get = await visit(app, '/nothing-here')
  t.match(pageHeaders(missing), { status: 404, type: 'text/html; charset=utf-8', cacheControl: 'private, no-store', hasCsp: true })
  t.equal(missing.body, '')
  t.ok(get.body.length > 0)
})

t.test('on a short domain, anything that is no link is the 404 page', async (t) => {
  // Paths that cannot be decoded (a bad escape, bytes that are not UTF-8) included.
  const paths = ['/unknown', '/', '/a/b', '/not.a.slug', '/with%20space', `/${'x'.repeat(65)}`, `/${'y'.repeat(300)}`, '/v1', '/%zz', '/p%zz', '/%E0%A4%A']
  for (const path of paths) {
    const response = await visit(app, path)
    t.match(pageHeaders(response), { status: 404, type: 'text/html; charset=utf-8', cacheControl: 'private, no-store', hasCsp: true }, path)
  }
  const head = await app.inject({ method: 'HEAD', url: '/%zz', headers: { host: 'go.acme.test' } })
  t.equal(head.statusCode, 404)
  t.equal(head.body, '', 'HEAD: no body')
  // Elsewhere the same path is the API's problem, as before.
  const api = await visit(app, '/%zz', { host: 'api.example.com' })
  t.equal(api.statusCode, 400)
  t.equal(json(api).code, 'bad_request')
  // A POST to such a path (a form sent again from an odd address) too, whatever its body.
  for (const [path, type] of [['/a/b', 'application/x-www-form-urlencoded'], ['/a/b/c', 'application/json'], ['/x//', 'text/plain']]) {
    const posted = await app.inject({ method: 'POST', url: path, headers: { host: 'go.acme.test', 'content-type': type }, payload: 'password=x' })
    t.match(pageHeaders(posted), { status: 404, type: 'text/html; charset=utf-8', cacheControl: 'private, no-store', hasCsp: true }, `POST ${path}`)
  }
})

t.test('on any other host these paths are the API\'s problem+json 404, as before', async (t) => {
  for (const host of ['api.example.com', 'localhost:3000', '127.0.0.1', 'acme.test']) {
    for (const path of ['/summer', '/', '/robots.txt', '/favicon.ico', '/a/b']) {
      const response = await visit(app, path, { host })
      t.equal(response.statusCode, 404, `${host}${path}`)
      t.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8')
      t.equal(json(response).code, 'not_found')
    }
  }
  const posted = await app.inject({
    method: 'POST', url: '/summer', headers: { host: 'api.example.com', 'content-type': 'application/x-www-form-urlencoded' }, payload: 'password=x',
  })
  t.equal(posted.statusCode, 404)
  t.equal(json(posted).code, 'not_found')
  // Any other path, whatever its body's type: still the API's 404, not a 415 for the body.
  for (const type of ['application/x-www-form-urlencoded', 'text/plain', 'application/json']) {
    const other = await app.inject({ method: 'POST', url: '/a/b', headers: { host: 'api.example.com', 'content-type': type }, payload: '{}' })
    t.equal(other.statusCode, 404, type)
    t.equal(json(other).code, 'not_found')
  }
})

t.test('the API works on every host, short domains included', async (t) => {
  for (const host of ['go.acme.test', 'api.example.com']) {
    t.equal((await visit(app, '/healthz', { host })).statusCode, 200)
    t.equal((await visit(app, '/openapi.json', { host })).statusCode, 200)
    const list = await app.inject({ url: '/v1/links', headers: { host, 'api-authorization': token } })
    t.equal(list.statusCode, 200)
    t.equal(json(list).links[0].id, 'Summer')
  }
})

t.test('the visitor routes are not in the OpenAPI document', async (t) => {
  const paths = Object.keys(json(await visit(app, '/openapi.json', { host: 'api.example.com' })).paths)
  t.notOk(paths.some((path) => path.includes('slug') || path === '/robots.txt' || path === '/favicon.ico' || path.includes('*')), paths.join(' '))
})

t.test('X-Forwarded-Host counts only from a proxy TRUST_PROXY trusts', async (t) => {
  const forwarded = { host: 'internal.lb', headers: { 'x-forwarded-host': 'go.acme.test' } }
  const untrusted = await visit(app, '/summer', forwarded)
  t.equal(untrusted.statusCode, 404)
  t.equal(json(untrusted).code, 'not_found')

  const behindProxy = await buildTestApp(t, { database, env: { TRUST_PROXY: '127.0.0.1' } })
  await behindProxy.app.redirects.domains.refresh()
  const trusted = await visit(behindProxy.app, '/summer', { ...forwarded, remoteAddress: '127.0.0.1' })
  t.equal(trusted.statusCode, 302)
  t.equal(trusted.headers.location, 'https://example.com/summer-sale')
  const otherSender = await visit(behindProxy.app, '/summer', { ...forwarded, remoteAddress: '10.1.2.3' })
  t.equal(otherSender.statusCode, 404, 'a sender that is not the trusted proxy cannot choose the host')

  // A hop count: the nearest hop is the proxy, whatever its address.
  const oneHop = await buildTestApp(t, { database, env: { TRUST_PROXY: '1' } })
  await oneHop.app.redirects.domains.refresh()
  const throughOneHop = await visit(oneHop.app, '/summer', { ...forwarded, remoteAddress: '10.1.2.3' })
  t.equal(throughOneHop.statusCode, 302, 'TRUST_PROXY=1 trusts the nearest hop (Fastify alone would trust none)')
})

t.test('an absolute-form request target names the host itself: the Host header is ignored (RFC 9112 section 3.2.2)', async (t) => {
  const { app: listening } = await buildTestApp(t, { database })
  await listening.redirects.domains.refresh()
  await listening.listen({ port: 0, host: '127.0.0.1' })
  const port = (listening.server.address() as AddressInfo).port
  const get = (target: string, host: string) => rawRequest(port, `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: ${DESKTOP}\r\nConnection: close\r\n\r\n`)

  const forShortDomain = await get('http://GO.ACME.TEST:8080/summer', 'api.example.com')
  t.equal(forShortDomain.status, 302, 'the target is a short domain: the link, whatever the Host')
  t.equal(forShortDomain.headers.location, 'https://example.com/summer-sale')
  const forOtherHost = await get('http://api.example.com/summer', 'go.acme.test')
  t.equal(forOtherHost.status, 404, 'the target is another host: no link, whatever the Host')
  t.match(forOtherHost.headers['content-type'], /problem\+json/)
  t.equal((await get('/summer', 'go.acme.test')).status, 302, 'origin form: the Host header, as always')
  // User information in the target is an error (RFC 9110 section 4.2.4): read as a host by some, not by others.
  for (const target of ['http://evil.example@go.acme.test/summer', 'http://user:secret@go.acme.test/summer', 'http://@go.acme.test/summer']) {
    const refused = await get(target, 'go.acme.test')
    t.equal(refused.status, 400, target)
    t.match(JSON.parse(refused.body), { code: 'bad_request', detail: /user information/ })
  }
  const withoutHost = await rawRequest(port, `GET http://evil.example@go.acme.test/summer HTTP/1.0\r\nUser-Agent: ${DESKTOP}\r\n\r\n`)
  t.equal(withoutHost.status, 400, 'HTTP/1.0 without a Host header too')
  t.equal((await get('http://go.acme.test/summer?email=a@b.example', 'go.acme.test')).status, 302, 'an @ in the query is no user information')

  // Behind a trusted proxy its X-Forwarded-Host names the visitor's host, whatever the form of the target it sends.
  const { app: proxied } = await buildTestApp(t, { database, env: { TRUST_PROXY: '127.0.0.1' } })
  await proxied.redirects.domains.refresh()
  await proxied.listen({ port: 0, host: '127.0.0.1' })
  const proxiedPort = (proxied.server.address() as AddressInfo).port
  const forwarded = await rawRequest(
    proxiedPort,
    `GET http://api.example.com/summer HTTP/1.1\r\nHost: api.example.com\r\nX-Forwarded-Host: go.acme.test\r\nUser-Agent: ${DESKTOP}\r\nConnection: close\r\n\r\n`,
  )
  t.equal(forwarded.status, 302, "a trusted proxy's X-Forwarded-Host")
  t.equal(forwarded.headers.location, 'https://example.com/summer-sale')
})

t.test('a domain added later (by the command line) is served on its first visit once the domains are read again', async (t) => {
  const { app: fresh } = await buildTestApp(t, { database, redirects: { domainsRefreshMs: 100 } })
  await fresh.ready()
  const later = client(fresh, await createWorkspaceToken(prisma, { workspace: 'later', domains: ['go.later.test'] }))
  t.equal((await later.create({ domain: 'go.later.test', id: 'new', url: 'https://example.com/new' }, { autofill: false })).statusCode, 201)
  // No visit meanwhile: the list is read on a timer, not when a visit comes (which answered that visit from the old list).
  await sleep(500)
  const response = await visit(fresh, '/new', { host: 'go.later.test' })
  t.equal(response.statusCode, 302)
  t.equal(response.headers.location, 'https://example.com/new')
})

t.test('robots.txt lets crawlers read the link pages; favicon.ico is an empty 404 browsers may keep', async (t) => {
  const robots = await visit(app, '/robots.txt')
  t.equal(robots.statusCode, 200)
  t.equal(robots.headers['content-type'], 'text/plain; charset=utf-8')
  t.equal(robots.body, 'User-agent: *\nAllow: /\n')
  const favicon = await visit(app, '/favicon.ico')
  t.equal(favicon.statusCode, 404)
  t.equal(favicon.body, '')
  t.equal(favicon.headers['cache-control'], 'public, max-age=86400')
})

t.test('no log line per visit at info, a counter instead; API requests are still logged', async (t) => {
  const lines: { level: number; msg: string; req?: { url: string } }[] = []
  const { app: logged } = await buildTestApp(t, {
    database,
    logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } },
  })
  await logged.redirects.domains.refresh()
  for (const path of ['/summer', '/unknown', '/robots.txt', '/favicon.ico', '/a/b']) await visit(logged, path)
  await visit(logged, '/summer', { method: 'HEAD' })
  t.same(lines.filter((line) => line.level < 40), [], 'nothing below warn for visits')
  t.equal(logged.redirects.counters.redirect, 2)
  t.equal(logged.redirects.counters.notFound, 2)

  await logged.inject({ url: '/openapi.json', headers: { host: 'go.acme.test', 'user-agent': DESKTOP } })
  t.ok(lines.some((line) => line.req?.url === '/openapi.json'), 'the API keeps its request log')
})

t.test('a database that cannot be reached: 503, and a warning with the request id', async (t) => {
  const lines: { level: number; msg: string; reqId?: string }[] = []
  const unreachable = { ...database, query: async () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:5432')) }
  const { app: cut } = await buildTestApp(t, {
    database: unreachable,
    logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } },
  })
  await cut.redirects.domains.refresh()
  const response = await visit(cut, '/summer', { headers: { 'x-request-id': 'visit-42' } })
  t.equal(response.statusCode, 503)
  t.equal(json(response).code, 'unavailable')
  t.match(lines.filter((line) => line.level >= 40 && line.msg.startsWith('request failed')), [{ level: 40, reqId: 'visit-42' }])
  t.notOk(lines.some((line) => line.level < 40), 'still nothing below warn')
  // An outage answers every visit 503: one warning a minute, not one (with its stack) per visit.
  for (let i = 0; i < 20; i++) t.equal((await visit(cut, `/cold-${i}`)).statusCode, 503)
  t.equal(lines.filter((line) => line.msg.startsWith('request failed')).length, 1, 'the first only, within the minute')
})

t.test('the password form\'s body type is the visitor routes\' only: the API does not parse it', async (t) => {
  // The API's body routes refuse anything but JSON in onRequest; a DELETE has no such guard, so it shows
  // whether a form parser reached the API's scope.
  const created = await link({ id: 'form-delete' })
  const response = await app.inject({
    method: 'DELETE', url: `/v1/links/${created.uniq}`,
    headers: { host: 'go.acme.test', 'api-authorization': token, 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'a=b',
  })
  t.equal(response.statusCode, 415)
  t.equal(json(response).code, 'unsupported_media_type')
})
