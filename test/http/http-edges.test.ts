/**
 * Issue 9, items 11 and 12: what the HTTP layer itself answers (the router, Node's HTTP parser, the
 * server's timeouts) is application/problem+json with a code like every other error, and a domain as long
 * as a host name may be (253 characters, longer still in its percent-encoded Unicode form) is reachable in
 * the path. Sent on a real socket, as app.inject cannot send malformed HTTP.
 */
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import t from 'tap'
import { connectionCap, MAX_PARAM_LENGTH } from '../../src/plugins/http-server.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'
import { openConnection, rawRequest, readUntilClosed, type RawResponse } from '../support/raw-http.js'

const logLines: Record<string, any>[] = []
const logger = { level: 'info', stream: { write: (line: string) => void logLines.push(JSON.parse(line)) } }
const { app, prisma, database } = await buildTestApp(t, { logger })

/** 253 characters, the most a host name may have: three labels of 63, one of 56, and `test`. */
const LONGEST_DOMAIN = ['a'.repeat(63), 'b'.repeat(63), 'c'.repeat(63), 'd'.repeat(56), 'test'].join('.')
/** 196 characters in ASCII (punycode), over 1,500 in the path once its Unicode form is percent-encoded. */
const UNICODE_DOMAIN = ['中'.repeat(57), '文'.repeat(57), '字'.repeat(57), 'test'].join('.')
const token = await createWorkspaceToken(prisma, {
  workspace: 'edges',
  defaultDomain: 'go.edges.test',
  domains: [LONGEST_DOMAIN, UNICODE_DOMAIN],
})

await app.listen({ port: 0, host: '127.0.0.1' })
const { port } = app.server.address() as AddressInfo

/** One request on its own connection, as a client would send it; the server closes the connection after it. */
function send(method: string, path: string, options: { body?: string; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = {
    host: 'api.edges.test',
    'api-authorization': token,
    connection: 'close',
    ...(options.body !== undefined ? { 'content-length': String(Buffer.byteLength(options.body)) } : {}),
    ...options.headers,
  }
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  return rawRequest(port, `${method} ${path} HTTP/1.1\r\n${head}\r\n${options.body ?? ''}`)
}

function assertProblem(t: Test, response: RawResponse, status: number, code: string) {
  t.equal(response.status, status, `${status} ${code}`)
  t.ok(response.complete, 'a complete answer')
  t.match(response.headers['content-type'], /^application\/problem\+json/)
  let body: Record<string, unknown> = {}
  try {
    body = JSON.parse(response.body)
  } catch {
    t.fail(`the body is JSON: ${response.body}`)
  }
  t.match(body, { type: 'about:blank', title: String, status, code, detail: String })
}

t.test('item 11: every error the HTTP layer answers is problem+json with a code', async (t) => {
  t.test('a malformed percent-encoding in the path is 400 bad_request', async (t) => {
    for (const [method, path] of [
      ['GET', '/v1/links/1%C3'],
      ['DELETE', '/v1/links/1%C3'],
      ['GET', '/v1/links/by-domain/go%C3.edges.test/summer'],
      ['DELETE', '/v1/links/by-domain/go.edges.test/sum%E0%A4mer'],
      ['GET', '/v1/scripts/%ZZ'],
    ]) {
      const response = await send(method, path)
      assertProblem(t, response, 400, 'bad_request')
      t.match(response.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'with a request id like every answer')
    }
  })

  t.test('a path parameter over the router limit is 414 uri_too_long', async (t) => {
    assertProblem(t, await send('GET', `/v1/links/${'1'.repeat(MAX_PARAM_LENGTH + 1)}`), 414, 'uri_too_long')
    const domain = `${'a.'.repeat(MAX_PARAM_LENGTH / 2)}test`
    assertProblem(t, await send('DELETE', `/v1/links/by-domain/${domain}/summer`), 414, 'uri_too_long')
    // At the limit itself the route answers: the id is refused by its pattern, not by its length.
    const atLimit = await send('GET', `/v1/links/${'1'.repeat(MAX_PARAM_LENGTH)}`)
    t.equal(atLimit.status, 400, 'a parameter of exactly the limit reaches the route')
  })

  t.test('headers over the size limit are 431 headers_too_large, and the connection is closed', async (t) => {
    const response = await send('GET', '/v1/links', { headers: { 'x-padding': 'p'.repeat(20_000) } })
    assertProblem(t, response, 431, 'headers_too_large')
    t.equal(response.headers.connection, 'close')
    t.equal(response.error, undefined, 'not reset')
  })

  t.test('a Content-Type sent twice, or a charset given twice, is 415: a proxy in front may have read another', async (t) => {
    const body = JSON.stringify({ link: { url: 'https://example.com/twice', id: 'twice' }, autofill: false })
    for (const [raw, detail] of [
      ['content-type: application/json\r\ncontent-type: text/plain', /Content-Type once/],
      ['content-type: application/json; charset=utf-8; charset=latin1', /charset once/],
    ] as const) {
      const [name, value] = raw.split('\r\n')[0].split(': ')
      const response = await send('POST', '/v1/links/create', { body, headers: { [name]: raw.slice(name.length + 2) } })
      assertProblem(t, response, 415, 'unsupported_media_type')
      t.match(JSON.parse(response.body).detail, detail, value)
    }
    t.equal(await prisma.link.count({ where: { slug: 'twice' } }), 0, 'nothing stored')
    t.equal((await send('POST', '/v1/links/create', { body, headers: { 'content-type': 'application/json; charset=utf-8' } })).status, 201, 'once is fine')
  })

  t.test('to a HEAD, these answers carry no body (RFC 9110 section 9.3.2)', async (t) => {
    for (const [request, status] of [
      [`HEAD /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ${'p'.repeat(20_000)}\r\n\r\n`, 431],
      ['HEAD /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n', 400],
    ] as const) {
      const response = await rawRequest(port, request)
      t.equal(response.status, status)
      t.match(response.headers['content-type'], /^application\/problem\+json/)
      t.equal(response.body, '', 'no body')
      t.equal(response.headers.connection, 'close')
    }
  })

  t.test('a malformed request line or header is 400 bad_request, and the connection is closed', async (t) => {
    const malformed = [
      'GET /v1/links HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n',
      'GET /v1/links HTTP/1.1\r\nHost: x\r\nX-Nul: a\0b\r\n\r\n',
      'G@T /v1/links HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET /v1/links HTTP/9.9\r\nHost: x\r\n\r\n',
      'POST /v1/links/create HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'POST /v1/links/create HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n',
    ]
    for (const request of malformed) {
      const response = await rawRequest(port, request)
      assertProblem(t, response, 400, 'bad_request')
      t.equal(response.headers.connection, 'close', JSON.stringify(request.split('\r\n')[0]))
    }
  })

  t.test('an HTTP/1.1 request without Host is 400 bad_request, an Expect other than 100-continue is 417', async (t) => {
    const noHost = await rawRequest(port, `GET /v1/links HTTP/1.1\r\nApi-Authorization: ${token}\r\nConnection: close\r\n\r\n`)
    assertProblem(t, noHost, 400, 'bad_request')
    t.match(JSON.parse(noHost.body).detail, /Host/)
    const body = JSON.stringify({ link: { url: 'https://example.com/expect' }, autofill: false })
    const expect = { 'content-type': 'application/json', expect: 'a-teapot' }
    assertProblem(t, await send('POST', '/v1/links/create', { body, headers: expect }), 417, 'expectation_failed')
    t.equal(await prisma.link.count({ where: { url: 'https://example.com/expect' } }), 0, 'nothing stored')
  })

  t.test('two Host headers, or a Host that is no host name or address, is 400 bad_request (RFC 9112 section 3.2)', async (t) => {
    const bad = [
      'Host: short.test\r\nHost: evil.example',
      'Host: short.test\r\nhOsT: short.test',
      'Host: user@short.test',
      'Host: short.test/x',
      'Host: short.test:80:80',
      'Host: short test',
    ]
    for (const hostLines of bad) {
      const response = await rawRequest(port, `GET /summer HTTP/1.1\r\n${hostLines}\r\nConnection: close\r\n\r\n`)
      assertProblem(t, response, 400, 'bad_request')
      t.match(JSON.parse(response.body).detail, /one Host header/, hostLines)
    }
    // What real clients send is untouched: a name, a port, an IP address (v4 or v6), a final dot, any case.
    for (const host of ['localhost', 'localhost:3000', '127.0.0.1:80', '[::1]:3000', 'Short.Test.', 'xn--bcher-kva.example:']) {
      const response = await rawRequest(port, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`)
      t.equal(response.status, 200, host)
    }
    // Past Node's default of 2,000 headers a second Host went unseen.
    const filler = Array.from({ length: 2100 }, (_, i) => `X-F${i}: 1\r\n`).join('')
    const late = await rawRequest(port, `GET /healthz HTTP/1.1\r\nHost: short.test\r\n${filler}Host: evil.example\r\nConnection: close\r\n\r\n`)
    assertProblem(t, late, 400, 'bad_request')
    t.match(JSON.parse(late.body).detail, /one Host header/, 'a second Host after 2,100 other headers')
  })

  t.test('API answers before any hook (a path that cannot be decoded) and to absolute-form targets carry the API headers', async (t) => {
    for (const request of [
      `GET /v1/links/%zz HTTP/1.1\r\nHost: api.edges.test\r\nConnection: close\r\n\r\n`,
      `GET http://api.edges.test/v1/links HTTP/1.1\r\nHost: api.edges.test\r\nConnection: close\r\n\r\n`,
      `GET http://api.edges.test/v1/links HTTP/1.1\r\nHost: api.edges.test\r\nApi-Authorization: ${token}\r\nConnection: close\r\n\r\n`,
    ]) {
      const response = await rawRequest(port, request)
      t.equal(response.headers['cache-control'], 'no-store', `${response.status}: ${request.split('\r\n')[0]}`)
      t.equal(response.headers['x-content-type-options'], 'nosniff')
    }
  })

  t.test('CONNECT (a proxy tunnel) is answered as a path the service does not have, not by a closed socket', async (t) => {
    for (const target of ['127.0.0.1:5432', '/healthz']) {
      const response = await rawRequest(port, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`)
      assertProblem(t, response, 404, 'not_found')
    }
  })

  t.test('a request whose body does not arrive in time is 408 request_timeout', async (t) => {
    // The same service with short timeouts (the real ones are in src/plugins/http-server.ts).
    const timeouts = { headersMs: 200, requestMs: 300, checkIntervalMs: 50 }
    const slow = await buildTestApp(t, { logger, database, httpTimeouts: timeouts })
    await slow.app.listen({ port: 0, host: '127.0.0.1' })
    const slowPort = (slow.app.server.address() as AddressInfo).port

    // A body that stops half way (a slow-loris upload) …
    const upload = await openConnection(slowPort)
    const uploadAnswer = readUntilClosed(upload)
    upload.write(
      `POST /v1/links/create HTTP/1.1\r\nHost: x\r\nApi-Authorization: ${token}\r\nContent-Type: application/json\r\n` +
        'Content-Length: 100\r\n\r\n{"link":',
    )
    assertProblem(t, await uploadAnswer, 408, 'request_timeout')

    // … and headers that never end.
    const headers = await openConnection(slowPort)
    const headersAnswer = readUntilClosed(headers)
    headers.write('GET /v1/links HTTP/1.1\r\nHost: x\r\nX-Slow: ')
    assertProblem(t, await headersAnswer, 408, 'request_timeout')
  })

  t.test('an unknown route or an unsupported method on a known path is 404 not_found', async (t) => {
    assertProblem(t, await send('GET', '/v1/nothing-here'), 404, 'not_found')
    assertProblem(t, await send('PATCH', '/v1/links/1', { body: '{}', headers: { 'content-type': 'application/json' } }), 404, 'not_found')
    assertProblem(t, await send('OPTIONS', '/v1/links/create'), 404, 'not_found')
    // QUERY (a method with a body, to Fastify) without a Content-Type was Fastify's 400 turned into a 500.
    for (const path of ['/healthz', '/v1/links', '/anything']) assertProblem(t, await send('QUERY', path), 400, 'bad_request')
    assertProblem(t, await send('QUERY', '/healthz', { body: '{}', headers: { 'content-type': 'application/json' } }), 404, 'not_found')
  })

  t.test('a body on a DELETE is read like any body: 413, 415, 400 invalid_json; a GET ignores its body', async (t) => {
    const json = { 'content-type': 'application/json' }
    assertProblem(t, await send('DELETE', '/v1/links/1', { body: `{"x":"${'x'.repeat(70_000)}"}`, headers: json }), 413, 'payload_too_large')
    for (const contentType of ['text/plain', ';;;']) {
      const response = await send('DELETE', '/v1/links/by-domain/go.edges.test/x', { body: 'x=1', headers: { 'content-type': contentType } })
      assertProblem(t, response, 415, 'unsupported_media_type')
    }
    assertProblem(t, await send('DELETE', '/v1/links/by-domain/go.edges.test/x', { body: '{"x":', headers: json }), 400, 'invalid_json')
    assertProblem(t, await send('GET', '/v1/links/999999', { body: '{"x":', headers: json }), 404, 'not_found')
    // What no body may hold (README, Field rules) is refused in a DELETE's too, and the link stays.
    const created = await send('POST', '/v1/links/create', { body: JSON.stringify({ link: { url: 'https://example.com/', id: 'kept', autofill: false } }), headers: json })
    t.equal(created.status, 201)
    for (const body of ['{"a":"\\u0000"}', '{"__proto__":{}}', '{"a":"\\ud800"}', `${'['.repeat(40)}1${']'.repeat(40)}`]) {
      const response = await send('DELETE', '/v1/links/by-domain/go.edges.test/kept', { body, headers: json })
      assertProblem(t, response, 400, 'validation_failed')
    }
    t.equal(await prisma.link.count({ where: { domain: 'go.edges.test', slug: 'kept' } }), 1, 'the link is still there')
    // What the schema refuses beside it is named too: here the path's parameter.
    const both = await send('PUT', '/v1/links/0', { body: '{"link":{"title":"a\\u0000"}}', headers: json })
    assertProblem(t, both, 400, 'validation_failed')
    t.same(JSON.parse(both.body).errors.map((error: { path: string }) => error.path).sort(), ['/link/title', '/uniqId'])
  })
})

t.test('item 12: a link on a 253-character domain is reachable by domain', async (t) => {
  t.equal(LONGEST_DOMAIN.length, 253)
  for (const domain of [LONGEST_DOMAIN, UNICODE_DOMAIN]) {
    const body = JSON.stringify({ link: { url: 'https://example.com/long', domain, id: 'far' }, autofill: false })
    const created = await send('POST', '/v1/links/create', { body, headers: { 'content-type': 'application/json' } })
    t.equal(created.status, 201, created.body)
    const stored = JSON.parse(created.body)
    const path = `/v1/links/by-domain/${encodeURIComponent(domain)}/far`
    t.ok(path.length > 100 + '/v1/links/by-domain//far'.length, `a domain param of ${encodeURIComponent(domain).length} characters`)

    const read = await send('GET', path)
    t.equal(read.status, 200, read.body)
    t.equal(JSON.parse(read.body).uniq, stored.uniq)

    const update = JSON.stringify({ link: { title: 'Far away' }, autofill: false })
    const updated = await send('PUT', path, { body: update, headers: { 'content-type': 'application/json' } })
    t.equal(updated.status, 200, updated.body)
    t.equal(JSON.parse(updated.body).title, 'Far away')

    t.equal((await send('DELETE', path)).status, 204)
    t.equal((await send('GET', path)).status, 404)
    t.equal(await prisma.link.count({ where: { uniq: stored.uniq } }), 0, 'deleted')
  }
})

t.test('the log holds no error line', async (t) => {
  t.same(logLines.filter((line) => line.level >= 50), [])
})

t.test('the connection cap: the open-file limit less a reserve for the process\'s own connections and files', async (t) => {
  t.equal(connectionCap(20_000, 50), 18_926, 'a reserve of 1,024 at most, beside the files open already')
  t.equal(connectionCap(1024, 40), 728, 'a quarter of a small limit')
  t.equal(connectionCap(100, 90), 16, 'never below 16')
  t.equal(connectionCap(null, 10), null, 'no cap where the limit is unknown or unlimited')
  t.ok(app.server.maxConnections > 0 && app.server.maxConnections <= connectionCap()! + 50, 'applied to the server')
})
