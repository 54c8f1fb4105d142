/**
 * The request log: one line per request at `info`, written once it is answered, holding the request (method,
 * URL, no headers), the answer's status, its time and the request id (and, for an error, a line naming the
 * problem); the arrival line only at `debug`.
 */
import t, { type Test } from 'tap'
import { buildTestApp, client, createWorkspaceToken, json } from '../support/test-app.js'

async function appLoggingAt(t: Test, level: 'info' | 'debug') {
  const lines: Record<string, any>[] = []
  const { app, prisma } = await buildTestApp(t, { logger: { level, stream: { write: (line: string) => void lines.push(JSON.parse(line)) } } })
  return { app, prisma, lines }
}

t.test('at info: one line per request, once answered', async (t) => {
  const { app, prisma, lines } = await appLoggingAt(t, 'info')
  const token = await createWorkspaceToken(prisma, { workspace: 'logged', defaultDomain: 'go.logged.test' })
  const api = client(app, token)
  const created = await api.create({ id: 'logged', url: 'https://example.com/logged' }, { autofill: false })
  t.equal(created.statusCode, 201)
  const uniq = json(created).uniq
  const ok = await app.inject({ method: 'GET', url: `/v1/links/${uniq}`, headers: { 'x-request-id': 'read-1', 'api-authorization': token } })
  const missing = await app.inject({ method: 'GET', url: '/v1/links/999999', headers: { 'x-request-id': 'missing-1', 'api-authorization': token } })
  // Paths of no route fall to the visitor routes, which on the API's host answer the API's 404.
  const noRoute = await app.inject({ method: 'GET', url: '/v1/linkz', headers: { 'x-request-id': 'no-route-1', 'api-authorization': token } })
  const noRouteDeep = await app.inject({ method: 'GET', url: '/v1/links/1/nothing', headers: { 'x-request-id': 'no-route-2', 'api-authorization': token } })
  t.equal(ok.statusCode, 200)
  t.equal(missing.statusCode, 404)
  t.equal(noRoute.statusCode, 404)
  t.equal(noRouteDeep.statusCode, 404)

  // An error answer has a line of its own before it, naming the problem.
  const expected = [
    ['read-1', `/v1/links/${uniq}`, 200, ['request completed']],
    ['missing-1', '/v1/links/999999', 404, ['No such link', 'request completed']],
    // As a path no route matches is logged anywhere else.
    ['no-route-1', '/v1/linkz', 404, ['request completed']],
    ['no-route-2', '/v1/links/1/nothing', 404, ['request completed']],
  ] as const
  for (const [reqId, url, status, messages] of expected) {
    const mine = lines.filter((line) => line.reqId === reqId)
    t.same(mine.map((line) => line.msg), messages, `${reqId}: the lines`)
    const completed = mine.at(-1)!
    t.match(completed, { level: 30, req: { method: 'GET', url }, res: { statusCode: status } }, `${reqId}: the request and its answer`)
    t.type(completed.responseTime, 'number', `${reqId}: the time to answer`)
    t.notOk(JSON.stringify(mine).includes(token), `${reqId}: no token`)
  }
})

t.test('a token sent in the query string (where it does not belong) is masked in the log line', async (t) => {
  const { app, prisma, lines } = await appLoggingAt(t, 'info')
  const token = await createWorkspaceToken(prisma, { workspace: 'query-token', defaultDomain: 'go.query-token.test' })
  const response = await app.inject({ method: 'GET', url: `/v1/links?limit=1&token=${token}&api_key=${encodeURIComponent(token)}`, headers: { 'x-request-id': 'in-query' } })
  t.equal(response.statusCode, 401, 'read from Api-Authorization only')
  const mine = lines.filter((line) => line.reqId === 'in-query')
  t.ok(mine.length > 0)
  t.notOk(JSON.stringify(mine).includes(token.slice(11)), 'no part of the token past its shown prefix')
  t.equal(mine.at(-1)!.req.url, '/v1/links?limit=1&token=sl_[redacted]&api_key=sl_[redacted]')
  for (const url of [`/v1/links/${token}`, `/v1/links?k=${token.replace('sl_', 'sl%5F')}`, `/v1/links?k=${token.replace('sl_', 'sl%5f')}&more=1`, `/v1/links?q=${token.replace('sl_', 's%6c_')}`, `/v1/links?bad=%ZZ&k=${token}`, `/v1/links?q=%E0%A4%A&t=${token.replace('sl_', 'sl%5F')}`, `/v1/links?q=%ZZ&t=${token.replace('sl_', 's%6c_')}`, `/v1/links?t=${token.replace('sl_', '%73l_')}`]) {
    await app.inject({ method: 'GET', url, headers: { 'x-request-id': `elsewhere-${url.length}` } })
    const line = lines.filter((entry) => entry.reqId === `elsewhere-${url.length}`).at(-1)!
    t.notOk(JSON.stringify(line).includes(token.slice(11)), `${line.req.url}: masked`)
  }
  // A request id shaped like a token is not taken (a new one is made).
  const named = await app.inject({ method: 'GET', url: '/v1/links', headers: { 'x-request-id': token } })
  t.not(named.headers['x-request-id'], token)
  t.notOk(JSON.stringify(lines).includes(token.slice(11)), 'nowhere in the log')
  t.match(mine.at(-1)!.req, { method: 'GET', host: 'localhost:80', remoteAddress: '127.0.0.1' }, "Fastify's other fields as before")
})

t.test('the health probes write no line at info: a load balancer sends them every few seconds', async (t) => {
  const { app, lines } = await appLoggingAt(t, 'info')
  for (const url of ['/healthz', '/readyz']) {
    const response = await app.inject({ method: 'GET', url, headers: { 'x-request-id': `probe${url}` } })
    t.equal(response.statusCode, 200, url)
  }
  t.same(lines.filter((line) => String(line.reqId).startsWith('probe')), [], 'no line for either probe')
  t.ok(lines.some((line) => line.msg !== undefined), 'while the app does log at info')
})

t.test('at debug: the arrival too, for a request that never ends', async (t) => {
  const { app, lines } = await appLoggingAt(t, 'debug')
  await app.inject({ method: 'GET', url: '/openapi.json', headers: { 'x-request-id': 'arrival-1' } })
  t.same(lines.filter((line) => line.reqId === 'arrival-1').map((line) => line.msg), ['incoming request', 'request completed'])
})
