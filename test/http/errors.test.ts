/** Contract sections 1 and 6: every status code and its problem+json body. */
import type { LightMyRequestResponse } from 'fastify'
import type { Test } from 'tap'
import Fastify from 'fastify'
import t from 'tap'
import errors from '../../src/plugins/errors.js'
import { unavailable } from '../../src/errors/app-error.js'
import { buildApp } from '../../src/app.js'
import type { Database } from '../../src/db/database.js'
import { openDatabase } from '../../src/db/database.js'
import { buildTestApp, client, createWorkspaceToken, testAutofill, testConfig } from '../support/test-app.js'

const { app, prisma } = await buildTestApp(t)
const token = await createWorkspaceToken(prisma, { workspace: 'errs', defaultDomain: 'go.errs.test' })
const api = client(app, token)

function assertProblem(t: Test, response: LightMyRequestResponse, status: number, code: string) {
  t.equal(response.statusCode, status)
  t.match(response.headers['content-type'], /^application\/problem\+json/)
  t.match(response.json(), { type: 'about:blank', title: String, status, code, detail: String })
}

t.test('400 invalid_json for a body that is not JSON', async (t) => {
  for (const payload of ['{"link": ', 'not json', '{"link": {"url": "https://example.com/",}}']) {
    const response = await api.send('POST', '/v1/links/create', payload)
    assertProblem(t, response, 400, 'invalid_json')
  }
  const empty = await api.send('POST', '/v1/links/create', '')
  assertProblem(t, empty, 400, 'invalid_json')
})

t.test('400 validation_failed for JSON that is not an envelope', async (t) => {
  for (const payload of ['[]', '"text"', '42', '{}', '{"link": null}', '{"link": []}']) {
    const response = await api.send('POST', '/v1/links/create', payload)
    assertProblem(t, response, 400, 'validation_failed')
    t.ok(response.json().errors.length > 0)
  }
})

t.test('413 payload_too_large for a body over 64 KiB, even when it is valid JSON', async (t) => {
  const response = await api.create({ url: 'https://example.com/', note: 'x'.repeat(70 * 1024) })
  assertProblem(t, response, 413, 'payload_too_large')
  const atLimit = await api.create({ url: 'https://example.com/', note: 'y'.repeat(4096), description: 'z'.repeat(2048) })
  t.equal(atLimit.statusCode, 201, 'a body under the limit is fine')
})

t.test('415 unsupported_media_type without Content-Type: application/json', async (t) => {
  const body = JSON.stringify({ link: { url: 'https://example.com/' } })
  for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', undefined]) {
    for (const [method, url] of [['POST', '/v1/links/create'], ['PUT', '/v1/links/1']] as const) {
      const response = await app.inject({
        method,
        url,
        headers: { 'api-authorization': token, ...(contentType ? { 'content-type': contentType } : {}) },
        payload: body,
      })
      assertProblem(t, response, 415, 'unsupported_media_type')
    }
  }
  const withCharset = await api.send('POST', '/v1/links/create', body, { 'content-type': 'application/json; charset=utf-8' })
  t.equal(withCharset.statusCode, 201)
})

t.test('401 unauthorized comes before anything about the body', async (t) => {
  const response = await app.inject({ method: 'POST', url: '/v1/links/create', payload: 'not json', headers: { 'content-type': 'text/plain' } })
  assertProblem(t, response, 401, 'unauthorized')
})

t.test('404 not_found for unknown routes, as problem+json', async (t) => {
  const response = await app.inject({ method: 'GET', url: '/v1/nothing-here' })
  assertProblem(t, response, 404, 'not_found')
})

t.test('every response carries a request id, the caller\'s when it sends a sane one', async (t) => {
  const given = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'lb-1234' } })
  t.equal(given.headers['x-request-id'], 'lb-1234')
  const generated = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'bad id with spaces' } })
  t.match(generated.headers['x-request-id'], /^[0-9a-f-]{36}$/)
})

t.test('API answers are for no cache, and for no type sniffing; a QR code keeps its own cache policy', async (t) => {
  const created = await api.create({ url: 'https://example.com/uncached' }, { autofill: false })
  const uniq = created.json().uniq
  for (const response of [
    created,
    await app.inject({ method: 'GET', url: `/v1/links/${uniq}`, headers: { 'api-authorization': token } }),
    await app.inject({ method: 'GET', url: '/v1/links', headers: { 'api-authorization': token } }),
    await app.inject({ method: 'GET', url: '/v1/links' }),
    await app.inject({ method: 'GET', url: '/v1/nothing-here' }),
  ]) {
    t.equal(response.headers['cache-control'], 'no-store', `${response.statusCode}: no-store`)
    t.equal(response.headers['x-content-type-options'], 'nosniff')
  }
  const qr = await app.inject({ method: 'GET', url: `/v1/links/${uniq}/qr`, headers: { 'api-authorization': token } })
  t.equal(qr.statusCode, 200)
  t.match(qr.headers['cache-control'], /max-age/, 'the QR code: its own policy')
})

t.test('healthz and readyz', async (t) => {
  t.same((await app.inject('/healthz')).json(), { status: 'ok' })
  const ready = await app.inject('/readyz')
  t.equal(ready.statusCode, 200)
  t.same(ready.json(), { status: 'ready' })
})

t.test('503 unavailable when the database cannot be reached, without hanging', async (t) => {
  const unreachable = await openDatabase({ databaseUrl: 'postgresql://postgres@127.0.0.1:9/none', dataDir: 'unused', migrate: false })
  const broken = await buildApp({ config: testConfig(), database: unreachable, closeDatabase: true, logger: false, autofill: testAutofill() })
  t.teardown(() => broken.close())
  const started = Date.now()
  const response = await client(broken, token).create({ url: 'https://example.com/' })
  assertProblem(t, response, 503, 'unavailable')
  t.ok(Date.now() - started < 5000, 'answers within the connect timeout')
  const ready = await broken.inject('/readyz')
  t.equal(ready.statusCode, 503)
  t.equal((await broken.inject('/healthz')).statusCode, 200, 'the process is still alive')
})

t.test('500 internal says nothing about internals', async (t) => {
  const failing = {
    kind: 'postgres',
    ping: async () => true,
    pools: () => [],
    interrupt: () => {},
    close: async () => {},
    prisma: {
      apiToken: {
        findUnique: async () => {
          throw new Error('relation "secret_table" does not exist at /srv/app/internal.ts')
        },
      },
    },
  } as unknown as Database
  const broken = await buildApp({ config: testConfig(), database: failing, logger: false, autofill: testAutofill() })
  t.teardown(() => broken.close())
  const response = await client(broken, token).create({ url: 'https://example.com/' })
  assertProblem(t, response, 500, 'internal')
  t.notMatch(response.body, /secret_table|internal\.ts|relation/)
})

t.test('an empty body is no body on a DELETE, even with Content-Type: application/json', async (t) => {
  const created = await api.create({ url: 'https://example.com/to-delete' })
  const response = await app.inject({
    method: 'DELETE',
    url: `/v1/links/${created.json().uniq}`,
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
  })
  t.equal(response.statusCode, 204)
  const emptyPost = await api.send('POST', '/v1/links/create', '')
  t.equal(emptyPost.json().code, 'invalid_json', 'but an empty POST body is still malformed JSON')
})

t.test("the docs' static files: a path outside them or a range past the end is the client's 4xx, never a 500", async (t) => {
  const lines: { level: number; msg: string }[] = []
  const { app: docs } = await buildTestApp(t, { logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } } })
  t.equal((await docs.inject('/docs/static/index.css')).statusCode, 200, 'a file of the docs')
  for (const url of ['/docs/static/%2e%2e/%2e%2e/package.json', '/docs/static/%2e%2e/x', '/docs/static/a%00b']) {
    assertProblem(t, await docs.inject(url), 404, 'not_found')
  }
  const range = await docs.inject({ url: '/docs/static/index.css', headers: { range: 'bytes=999999-' } })
  assertProblem(t, range, 400, 'bad_request')
  t.same(lines.filter((line) => line.level >= 50), [], 'no error in the log')
})

t.test('503s are logged once a minute per cause, each with the count of its own unlogged', async (t) => {
  const lines: Record<string, any>[] = []
  const bare = Fastify({ logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } } })
  await bare.register(errors)
  bare.get('/store', async () => {
    throw unavailable('rate-limit store')
  })
  bare.get('/keys', async () => {
    throw unavailable('idempotency key store')
  })
  t.teardown(() => bare.close())
  for (let i = 0; i < 3; i++) t.equal((await bare.inject('/store')).statusCode, 503)
  t.equal((await bare.inject('/keys')).statusCode, 503)
  const warnings = lines.filter((line) => line.msg.startsWith('request failed: service unavailable'))
  t.same(warnings.map((line) => [line.err.message, line.unloggedSincePrevious]), [
    [unavailable('rate-limit store').message, 0],
    [unavailable('idempotency key store').message, 0],
  ], 'the first of each cause, the repeats of the first counted')
})
