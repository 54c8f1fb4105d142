/**
 * The request log: one line per request at `info`, written once it is answered, holding the request (method,
 * URL, no headers), the answer's status, its time and the request id (and, for an error, a line naming the
 * problem); the arrival line only at `debug`.
 */
import t, { type Test } from 'tap'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'

async function appLoggingAt(t: Test, level: 'info' | 'debug') {
  const lines: Record<string, any>[] = []
  const { app, prisma } = await buildTestApp(t, { logger: { level, stream: { write: (line: string) => void lines.push(JSON.parse(line)) } } })
  return { app, prisma, lines }
}

t.test('at info: one line per request, once answered', async (t) => {
  const { app, prisma, lines } = await appLoggingAt(t, 'info')
  const token = await createWorkspaceToken(prisma, { workspace: 'logged', defaultDomain: 'go.logged.test' })
  const ok = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'health-1' } })
  const missing = await app.inject({ method: 'GET', url: '/v1/links/999999', headers: { 'x-request-id': 'missing-1', 'api-authorization': token } })
  t.equal(ok.statusCode, 200)
  t.equal(missing.statusCode, 404)

  // An error answer has a line of its own before it, naming the problem.
  const expected = [['health-1', '/healthz', 200, ['request completed']], ['missing-1', '/v1/links/999999', 404, ['No such link', 'request completed']]] as const
  for (const [reqId, url, status, messages] of expected) {
    const mine = lines.filter((line) => line.reqId === reqId)
    t.same(mine.map((line) => line.msg), messages, `${reqId}: the lines`)
    const completed = mine.at(-1)!
    t.match(completed, { level: 30, req: { method: 'GET', url }, res: { statusCode: status } }, `${reqId}: the request and its answer`)
    t.type(completed.responseTime, 'number', `${reqId}: the time to answer`)
    t.notOk(JSON.stringify(mine).includes(token), `${reqId}: no token`)
  }
})

t.test('at debug: the arrival too, for a request that never ends', async (t) => {
  const { app, lines } = await appLoggingAt(t, 'debug')
  await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'health-2' } })
  t.same(lines.filter((line) => line.reqId === 'health-2').map((line) => line.msg), ['incoming request', 'request completed'])
})
