/**
 * Issue 9, input items: one test per item, each written to fail before its fix. Every answer here is a 4xx
 * or a success, never a 500, and nothing is stored for an error; the app's error log stays empty.
 */
import type { LightMyRequestResponse } from 'fastify'
import type { Test } from 'tap'
import t from 'tap'
import { gzipSync } from 'node:zlib'
import { BODY_LIMIT } from '../../src/plugins/errors.js'
import { apiClient } from '../support/api-client.js'
import { errorLog } from '../support/error-log.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'
import { WORST_CASES, worstCaseBody } from '../support/worst-cases.js'

type Json = Record<string, any>

const log = errorLog()
const { app, prisma } = await buildTestApp(t, { logger: log.logger })
const DOMAIN = 'go.acme.test'
const token = await createWorkspaceToken(prisma, { workspace: 'acme', defaultDomain: DOMAIN })
const api = apiClient(app, token)

const link = await api.link({ url: 'https://example.com/', id: 'kept', title: 'Kept' })
const folder = (await api.post('/v1/folders', { name: 'Kept' })).json()
const pixel = (await api.post('/v1/pixels', { platform: 'ga', value: 'UA-KEPT' })).json()
const script = (await api.post('/v1/scripts', { name: 'Kept', content: 'kept' })).json()

/** Everything a failed request could have changed: every row of every table a body can reach. */
async function snapshot() {
  return {
    links: await prisma.link.findMany({ orderBy: { uniq: 'asc' } }),
    linkPixels: await prisma.linkPixel.count(),
    folders: await prisma.folder.findMany({ orderBy: { id: 'asc' } }),
    pixels: await prisma.pixel.findMany({ orderBy: { id: 'asc' } }),
    scripts: await prisma.script.findMany({ orderBy: { id: 'asc' } }),
  }
}

/** Every route that takes a body, with a valid body to start from. */
const bodyRoutes: { name: string; method: 'POST' | 'PUT'; url: string; body: Json; field: string }[] = [
  { name: 'create link', method: 'POST', url: '/v1/links/create', body: { link: { url: 'https://example.com/' } }, field: '/link/note' },
  { name: 'update link', method: 'PUT', url: `/v1/links/${link.uniq}`, body: { link: {} }, field: '/link/note' },
  { name: 'update link by domain', method: 'PUT', url: `/v1/links/by-domain/${DOMAIN}/kept`, body: { link: {} }, field: '/link/note' },
  { name: 'create folder', method: 'POST', url: '/v1/folders', body: { name: 'F' }, field: '/name' },
  { name: 'rename folder', method: 'PUT', url: `/v1/folders/${folder.id}`, body: { name: 'F' }, field: '/name' },
  { name: 'create pixel', method: 'POST', url: '/v1/pixels', body: { platform: 'ga', value: 'V' }, field: '/value' },
  { name: 'update pixel', method: 'PUT', url: `/v1/pixels/${pixel.id}`, body: { value: 'V' }, field: '/value' },
  { name: 'create script', method: 'POST', url: '/v1/scripts', body: { name: 'S', content: 'c' }, field: '/content' },
  { name: 'update script', method: 'PUT', url: `/v1/scripts/${script.id}`, body: { content: 'c' }, field: '/content' },
]

/** Sets the value at a JSON pointer of a copy of `body`. */
function withValue(body: Json, pointer: string, value: unknown): Json {
  const copy = structuredClone(body)
  const keys = pointer.split('/').slice(1)
  let node: Json = copy
  for (const key of keys.slice(0, -1)) node = node[key] ??= {}
  node[keys.at(-1)!] = value
  return copy
}

function send(method: string, url: string, payload?: string | Buffer, headers: Record<string, string> = {}) {
  return app.inject({
    method: method as 'GET',
    url,
    headers: { 'api-authorization': token, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(payload !== undefined ? { payload } : {}),
  })
}

/** A 400 problem naming exactly these pointers, each message matching. */
function assertFieldErrors(t: Test, response: LightMyRequestResponse, expected: [string, RegExp][], what = '') {
  t.equal(response.statusCode, 400, `${what} answers 400`, { body: response.body.slice(0, 500) })
  t.match(response.headers['content-type'], /^application\/problem\+json/)
  const body = response.json()
  t.equal(body.code, 'validation_failed', what)
  t.same(body.errors?.map((error: Json) => error.path), expected.map(([path]) => path), `${what} names the fields`)
  expected.forEach(([, message], index) => t.match(body.errors[index]?.message, message, what))
}

t.test('item 6: deeply nested JSON is a 400 naming where it nests too deep, on every route with a body', async (t) => {
  const before = await snapshot()
  for (const route of bodyRoutes) {
    // 5,000 levels overflowed the recursive NUL check; the second is as deep as the body limit allows.
    for (const levels of [5_000, Math.floor(BODY_LIMIT / 2) - 100]) {
      const payload = JSON.stringify(withValue(route.body, route.field, 0)).replace(/0([}\]]*)$/, `${'['.repeat(levels)}${']'.repeat(levels)}$1`)
      const response = await send(route.method, route.url, payload)
      t.equal(response.statusCode, 400, `${route.name}, ${levels} levels`)
      const [error] = response.json().errors ?? [{}]
      t.match(error.path, new RegExp(`^${route.field}(/0)+$`), `${route.name}: the pointer leads into the nested value`)
      t.match(error.message, /nests deeper than 32 levels/)
    }
  }
  const shallow = await api.post('/v1/links/create', { link: { url: 'https://example.com/', somethingElse: JSON.parse(`${'['.repeat(28)}${']'.repeat(28)}`) } })
  t.equal(shallow.statusCode, 201, 'an unknown field nested within the limit is still ignored')
  await prisma.link.delete({ where: { uniq: shallow.json().uniq } })
  t.same(await snapshot(), before, 'nothing stored')
})

t.test('item 7: NUL in a path or query parameter is a 400 naming the parameter', async (t) => {
  const nul = [
    ['GET', `/v1/links/by-domain/${DOMAIN}/a%00b`, '/id'],
    ['DELETE', `/v1/links/by-domain/${DOMAIN}/a%00b`, '/id'],
    ['GET', '/v1/links/by-domain/go%00.acme.test/kept', '/domain'],
    ['GET', '/v1/links?q=a%00b', '/q'],
    ['GET', '/v1/links?tag=a%00b', '/tag'],
    ['GET', '/v1/links?tag=x&tag=a%00b', '/tag/1'],
    ['GET', '/v1/links?domain=go.acme.test%00', '/domain'],
    ['GET', '/v1/links?cursor=%00', '/cursor'],
    ['GET', '/v1/links/1%00', '/uniqId'],
    ['DELETE', `/v1/folders/${folder.id}?moveLinksTo=1%00`, '/moveLinksTo'],
    ['DELETE', `/v1/pixels/${pixel.id}%00`, '/uuid'],
    ['GET', `/v1/scripts/${script.id}%00`, '/id'],
  ]
  for (const [method, url, path] of nul) {
    const response = await send(method, url)
    t.equal(response.statusCode, 400, `${method} ${url}`)
    t.equal(response.json().errors?.[0]?.path, path, `${method} ${url} names ${path}`)
  }
  const put = await send('PUT', `/v1/links/by-domain/${DOMAIN}/a%00b`, JSON.stringify({ link: { title: 'x' } }))
  assertFieldErrors(t, put, [['/id', /NUL/]], 'PUT by-domain')

  // Fastify keeps a malformed percent-encoding in a query value as it came ("%C3"): refused instead.
  for (const query of ['q=%C3', 'q=%ED%A0%80', 'tag=ok&tag=%FF', 'q=%E2%82']) {
    const response = await send('GET', `/v1/links?${query}`)
    t.equal(response.statusCode, 400, query)
    t.match(response.json().errors[0], { path: /^\/(q|tag)/, message: /UTF-8/ }, query)
  }
  t.equal((await send('GET', '/v1/links?q=%25C3')).statusCode, 200, 'an encoded percent sign is fine')
  t.equal((await send('GET', `/v1/links/by-domain/${DOMAIN}/kept`)).statusCode, 200)
  t.equal((await prisma.folder.count({ where: { id: folder.id } })), 1)
})

t.test('item 8: lone surrogates are a 400 naming the field, in every string field and key', async (t) => {
  const before = await snapshot()
  const lone = ['\ud800', 'a\udc00', '\udbff\ud800x', 'x\udfff\ud83d']
  const linkFields: [string, unknown][] = [
    ['/link/url', 'https://example.com/LONE'],
    ['/link/domain', 'LONE.test'],
    ['/link/id', 'LONE'],
    ['/link/title', 'LONE'],
    ['/link/description', 'LONE'],
    ['/link/note', 'LONE'],
    ['/link/image', 'https://example.com/LONE.png'],
    ['/link/favicon', 'https://example.com/LONE.ico'],
    ['/link/tags', 'a,LONE'],
    ['/link/tags/1', ['a', 'LONE']],
    ['/link/folderId', 'LONE'],
    ['/link/pixels/0/value', [{ platform: 'ga', value: 'LONE' }]],
    ['/link/pixels/0/title', [{ platform: 'ga', value: 'v', title: 'LONE' }]],
    ['/link/pixels/0', ['LONE']],
    ['/link/extraOptionsGeolocations/0/url', [{ url: 'https://example.de/LONE', value: 'DE' }]],
    ['/link/extraOptionsGeolocations/0/value', [{ url: 'https://example.de/', value: 'LONE' }]],
    ['/link/extraOptionsLinkRotator/0/url', [{ url: 'https://example.com/LONE', value: 10 }]],
    ['/link/linkExpiration/end', { enable: true, end: '2030-01-01T00:00:00ZLONE', url: 'https://example.com/', timezone: 0 }],
    ['/link/linkExpiration/url', { enable: true, end: '2030-01-01T00:00:00Z', url: 'https://example.com/LONE', timezone: 0 }],
    ['/link/passwordProtect/password', { enable: true, password: 'LONE' }],
    ['/link/unknownField', 'LONE'],
  ]
  const fill = (value: unknown, text: string): unknown => JSON.parse(JSON.stringify(value).replaceAll('LONE', text))
  for (const text of lone) {
    const escaped = JSON.stringify(text)
    for (const [path, value] of linkFields) {
      const field = path.split('/')[2]
      for (const route of bodyRoutes.slice(0, 3)) {
        const body = { link: { ...route.body.link, [field]: fill(value, escaped.slice(1, -1)) } }
        const response = await send(route.method, route.url, JSON.stringify(body))
        assertFieldErrors(t, response, [[path, /must be valid Unicode/]], `${route.name} ${path} ${escaped}`)
      }
    }
    for (const route of bodyRoutes.slice(3)) {
      for (const key of Object.keys(route.body)) {
        if (key === 'platform') continue
        const response = await send(route.method, route.url, JSON.stringify({ ...route.body, [key]: `x${text}` }))
        assertFieldErrors(t, response, [[`/${key}`, /must be valid Unicode/]], `${route.name} /${key} ${escaped}`)
      }
    }
    const key = await send('POST', '/v1/links/create', `{"link":{"url":"https://example.com/",${JSON.stringify(text)}:1}}`)
    t.equal(key.statusCode, 400, 'a key with a lone surrogate')
    t.match(key.json().errors[0].message, /Unicode/)
  }
  t.same(await snapshot(), before, 'nothing stored')
  const paired = await api.link({ url: 'https://example.com/😀', title: '😀 \ud83d\ude00', tags: ['😀'] })
  t.equal(paired.title, '😀 😀', 'a surrogate pair is a character like any other')
})

t.test('item 9: a pixel named "urn:uuid:…" (the uuid format allows it) is that pixel, not a 500', async (t) => {
  for (const reference of [`urn:uuid:${pixel.id}`, `URN:UUID:${pixel.id.toUpperCase()}`]) {
    const byString = await api.link({ url: 'https://example.com/', pixels: [reference] })
    t.same(byString.pixels.map((p: Json) => p.id), [pixel.id], reference)
    const byObject = await api.link({ url: 'https://example.com/', pixels: [{ id: reference, platform: 'ga', value: 'UA-KEPT' }] })
    t.same(byObject.pixels.map((p: Json) => p.id), [pixel.id], `{id: ${reference}}`)
    const updated = await api.put(`/v1/links/${byObject.uniq}`, { link: { pixels: [reference] } })
    t.equal(updated.statusCode, 200)
  }
  const before = await snapshot()
  const unknown = await api.post('/v1/links/create', { link: { url: 'https://example.com/', pixels: ['urn:uuid:7d444840-9dc0-11d1-b245-5ffdce74fad2'] } })
  assertFieldErrors(t, unknown, [['/link/pixels/0', /not a pixel of this workspace/]])
  t.same(await snapshot(), before)
})

t.test('item 10: an expiration date PostgreSQL cannot store is a 400, not a 500', async (t) => {
  const expiration = (end: string) => ({ url: 'https://example.com/', linkExpiration: { enable: true, end, url: 'https://example.com/over', timezone: 0 } })
  const before = await snapshot()
  for (const end of ['0000-01-01T00:00:00Z', '0000-12-31T23:59:59.999Z', '0001-01-01T00:30:00+01:00', '9999-12-31T23:59:59-01:00']) {
    assertFieldErrors(t, await api.post('/v1/links/create', { link: expiration(end) }), [['/link/linkExpiration/end', /years 0001 and 9999/]], end)
    assertFieldErrors(t, await api.put(`/v1/links/${link.uniq}`, { link: expiration(end) }), [['/link/linkExpiration/end', /years 0001 and 9999/]], end)
  }
  t.same(await snapshot(), before, 'nothing stored')
  for (const end of ['0001-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z']) {
    t.equal((await api.link(expiration(end))).linkExpiration.end, end, 'the first and last instants are stored')
  }
})

t.test('item 13: a charset other than UTF-8, a Content-Encoding and invalid UTF-8 bytes are refused', async (t) => {
  const before = await snapshot()
  const body = JSON.stringify({ link: { url: 'https://example.com/', title: 'Café' } })
  for (const route of bodyRoutes) {
    for (const charset of ['latin1', 'ISO-8859-1', '"windows-1252"', 'utf-16']) {
      const response = await send(route.method, route.url, JSON.stringify(route.body), { 'content-type': `application/json; charset=${charset}` })
      t.equal(response.statusCode, 415, `${route.name} charset=${charset}`)
      t.match(response.json(), { code: 'unsupported_media_type', detail: /UTF-8/ })
    }
    for (const encoding of ['gzip', 'deflate', 'br', 'x-custom']) {
      const response = await send(route.method, route.url, JSON.stringify(route.body), { 'content-encoding': encoding })
      t.equal(response.statusCode, 415, `${route.name} Content-Encoding: ${encoding}`)
      t.match(response.json(), { code: 'unsupported_media_type', detail: /Content-Encoding/ })
    }
  }
  const gzipped = await send('POST', '/v1/links/create', gzipSync(body), { 'content-encoding': 'gzip' })
  t.equal(gzipped.statusCode, 415, 'a gzipped body is refused, not read as garbage')

  const latin1 = Buffer.from(body, 'latin1')
  for (const payload of [latin1, Buffer.from([...Buffer.from('{"link":{"url":"https://example.com/","title":"'), 0xed, 0xa0, 0x80, ...Buffer.from('"}}')])]) {
    const response = await send('POST', '/v1/links/create', payload)
    t.equal(response.statusCode, 400)
    t.match(response.json(), { code: 'invalid_json', detail: /UTF-8/ })
  }
  t.same(await snapshot(), before, 'nothing stored')

  for (const contentType of ['application/json; charset=utf-8', 'application/json;charset="UTF-8"', 'Application/JSON; Charset=UTF8']) {
    const response = await send('POST', '/v1/links/create', body, { 'content-type': contentType })
    t.equal(response.statusCode, 201, contentType)
    t.equal(response.json().title, 'Café')
  }
  const identity = await send('POST', '/v1/links/create', body, { 'content-encoding': 'identity' })
  t.equal(identity.statusCode, 201, 'Content-Encoding: identity is no encoding')
})

t.test('item 14: tag length counts characters (code points), not UTF-16 units', async (t) => {
  const emoji = (n: number) => '😀'.repeat(n)
  const created = await api.link({ url: 'https://example.com/', tags: [emoji(33), emoji(64)] })
  t.same(created.tags, [emoji(33), emoji(64)])
  const fromString = await api.link({ url: 'https://example.com/', tags: `${emoji(64)},b` })
  t.same(fromString.tags, [emoji(64), 'b'])
  const before = await snapshot()
  assertFieldErrors(t, await api.post('/v1/links/create', { link: { url: 'https://example.com/', tags: ['a', emoji(65)] } }), [['/link/tags/1', /at most 64 characters/]])
  t.same(await snapshot(), before)
  // The schema's own limits (AJV's maxLength) count code points too.
  const long = await api.link({ url: 'https://example.com/', title: emoji(512), passwordProtect: { enable: true, password: emoji(128) } })
  t.equal(long.title, emoji(512))
  t.equal((await api.post('/v1/folders', { name: emoji(100) })).statusCode, 201)
})

t.test('item 15: prototype keys are refused with a message that says so', async (t) => {
  const before = await snapshot()
  const cases: [string, string, string][] = [
    ['/v1/links/create', '{"link":{"url":"https://example.com/","__proto__":{"title":"x"}}}', '/link/__proto__'],
    ['/v1/links/create', '{"__proto__":{"x":1},"link":{"url":"https://example.com/"}}', '/__proto__'],
    ['/v1/links/create', '{"link":{"url":"https://example.com/","constructor":{"prototype":{"x":1}}}}', '/link/constructor'],
    ['/v1/links/create', '{"link":{"url":"https://example.com/","pixels":[{"platform":"ga","value":"v","__proto__":{}}]}}', '/link/pixels/0/__proto__'],
    ['/v1/folders', '{"name":"n","constructor":1}', '/constructor'],
  ]
  for (const [url, payload, path] of cases) {
    assertFieldErrors(t, await send('POST', url, payload), [[path, /prototype/]], payload)
  }
  t.same(await snapshot(), before, 'nothing stored')
  t.equal(({} as Json).x, undefined, 'and no prototype was touched')
})

t.test('item 15: ids with leading zeros and integers not in plain decimal are 400, not coerced', async (t) => {
  const cases: [string, string, string][] = [
    ['GET', `/v1/links/00${link.uniq}`, '/uniqId'],
    ['PUT', `/v1/links/0${link.uniq}`, '/uniqId'],
    ['DELETE', `/v1/links/0${link.uniq}`, '/uniqId'],
    ['PUT', `/v1/folders/0${folder.id}`, '/id'],
    ['DELETE', `/v1/folders/0${folder.id}`, '/id'],
    ['GET', `/v1/scripts/0${script.id}`, '/id'],
    ['PUT', `/v1/scripts/0${script.id}`, '/id'],
    ['DELETE', `/v1/scripts/0${script.id}`, '/id'],
    ['GET', '/v1/links?limit=1e1', '/limit'],
    ['GET', '/v1/links?limit=0x10', '/limit'],
    ['GET', '/v1/links?limit=%2012', '/limit'],
    ['GET', '/v1/links?limit=12.0', '/limit'],
    ['GET', '/v1/links?limit=%2B5', '/limit'],
    ['GET', '/v1/links?limit=010', '/limit'],
    ['GET', '/v1/links?folderId=0x10', '/folderId'],
    ['GET', `/v1/links?folderId=${folder.id}e0`, '/folderId'],
    ['DELETE', `/v1/folders/${folder.id}?moveLinksTo=0x1`, '/moveLinksTo'],
  ]
  const before = await snapshot()
  for (const [method, url, path] of cases) {
    const response = await send(method, url, method === 'PUT' ? JSON.stringify(url.includes('links') ? { link: { title: 'changed' } } : { name: 'changed' }) : undefined)
    t.equal(response.statusCode, 400, `${method} ${url}`)
    t.equal(response.json().errors?.[0]?.path, path, `${method} ${url}`)
  }
  t.same(await snapshot(), before, 'nothing changed or deleted')
  t.equal((await send('GET', `/v1/links/${link.uniq}`)).statusCode, 200)
  t.equal((await send('GET', `/v1/links?limit=10&folderId=${folder.id}`)).statusCode, 200)
  t.equal((await send('GET', '/v1/links/0')).statusCode, 400, 'no uniq is 0')
})

t.test('item 15: a URL with credentials is refused in every URL field', async (t) => {
  const before = await snapshot()
  const withCredentials = ['https://user:pass@example.com/', 'https://user@example.com/', 'http://:secret@example.com/x', 'https://@example.com/']
  for (const url of withCredentials) {
    const fields: [string, Json][] = [
      ['/link/url', { url }],
      ['/link/image', { url: 'https://example.com/', image: url }],
      ['/link/favicon', { url: 'https://example.com/', favicon: url }],
      ['/link/extraOptionsGeolocations/0/url', { url: 'https://example.com/', extraOptionsGeolocations: [{ url, value: 'DE' }] }],
      ['/link/extraOptionsLinkRotator/0/url', { url: 'https://example.com/', extraOptionsLinkRotator: [{ url, value: 10 }] }],
      ['/link/linkExpiration/url', { url: 'https://example.com/', linkExpiration: { enable: true, end: '2030-01-01T00:00:00Z', url, timezone: 0 } }],
    ]
    for (const [path, body] of fields) {
      const response = await api.post('/v1/links/create', { link: body })
      assertFieldErrors(t, response, [[path, /must not contain a user name or password/]], `${path} ${url}`)
    }
    assertFieldErrors(t, await api.put(`/v1/links/${link.uniq}`, { link: { url } }), [['/link/url', /user name or password/]], 'update')
  }
  t.same(await snapshot(), before, 'nothing stored')
  const atInPath = await api.link({ url: 'https://example.com/@team?mail=a@b.c#x@y' })
  t.equal(atInPath.url, 'https://example.com/@team?mail=a@b.c#x@y', 'an @ after the host is no credential')
})

t.test('item 17: the worst case of every array field at the body limit is a 400 with a bounded error list', async (t) => {
  const before = await snapshot()
  for (const { field, element } of WORST_CASES) {
    for (const [method, url, base] of [['POST', '/v1/links/create', { url: 'https://example.com/' }], ['PUT', `/v1/links/${link.uniq}`, {}]] as const) {
      const payload = worstCaseBody(field, element, base)
      t.ok(payload.length <= BODY_LIMIT && payload.length > BODY_LIMIT - 64, 'the body is at the limit')
      const response = await send(method, url, payload)
      const what = `${method} ${field} of ${JSON.stringify(element)}`
      t.equal(response.statusCode, 400, what)
      const problem = response.json()
      t.equal(problem.code, 'validation_failed')
      t.ok(problem.errors.length >= 1 && problem.errors.length <= 50, `${what}: ${problem.errors.length} errors listed, at most 50`)
      t.ok(problem.errors.every((error: Json) => error.path.startsWith(`/link/${field}`)), `${what}: every error names the field`)
      t.ok(problem.detail.length < 8 * 1024, `${what}: the detail stays short`)
    }
  }
  // More offending fields than the list holds: the detail says how many more there were.
  const many = await api.post('/v1/links/create', { link: { url: 'https://example.com/', extraOptionsGeolocations: Array(200).fill({ url: 1, value: 1 }) } })
  t.equal(many.json().errors.length, 50)
  t.match(many.json().detail, /and \d+ more/)
  t.same(await snapshot(), before, 'nothing stored')
})

t.test('no request of this file made the app log an error', async (t) => {
  t.same(log.errorLines(), [])
})
