/**
 * Issue 14, item 4: SIGTERM during a burst of API creates and of visitor redirects. Every connection the server
 * accepted gets a whole answer (201 or 302, or the drain's 503 for what arrived once the close began), every
 * visit answered 302 is stored before the process exits (the visit buffer is flushed on close), every 201 is
 * stored, and the process exits 0. test/server/shutdown-drain.test.ts covers a burst of API requests alone, and
 * test/analytics/shutdown.test.ts visits that were all answered before the signal.
 */
import { once } from 'node:events'
import t from 'tap'
import { openConnection, readUntilClosed, rawRequest } from '../support/raw-http.js'
import { logLines, serverDatabase, startServer } from '../support/server-process.js'

const CONNECTIONS = 60
const WARM_VISITS = 10
const BROWSER = 'Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0'

t.test('SIGTERM during a burst of creates and redirects: all answered, visits flushed, exit 0', async (t) => {
  const database = await serverDatabase(t, 'shutdown', 'go.shutdown.test')
  const server = await startServer(database.env)
  t.teardown(() => server.child.kill('SIGKILL'))
  const token = database.token(server.output())

  const create = (id: string) => {
    const body = JSON.stringify({ link: { id, url: `https://example.com/${id}` }, autofill: false })
    return (
      `POST /v1/links/create HTTP/1.1\r\nHost: api.shutdown.test\r\nApi-Authorization: ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
    )
  }
  const first = await rawRequest(server.port, create('visited'))
  t.equal(first.status, 201, first.body)
  const { uniq, domain } = JSON.parse(first.body)
  const visitRequest = (i: number) => `GET /visited?i=${i} HTTP/1.1\r\nHost: ${domain}\r\nUser-Agent: ${BROWSER}\r\nConnection: close\r\n\r\n`
  let redirected = 0
  for (let i = 0; i < WARM_VISITS; i++) {
    const answer = await rawRequest(server.port, visitRequest(i))
    t.equal(answer.status, 302)
    redirected++
  }

  // Connections opened first, so that many requests are still unread when the signal comes.
  const sockets = await Promise.all(Array.from({ length: CONNECTIONS }, () => openConnection(server.port)))
  const answers = sockets.map((socket) => readUntilClosed(socket))
  sockets.forEach((socket, i) => socket.write(i % 3 === 0 ? create(`burst-${i}`) : visitRequest(WARM_VISITS + i)))
  server.child.kill('SIGTERM')
  const [exitCode] = await once(server.child, 'exit')

  const created = ['visited']
  for (const [i, answer] of (await Promise.all(answers)).entries()) {
    const what = `connection ${i} (${i % 3 === 0 ? 'create' : 'visit'}): ${answer.status} ${answer.error ?? ''}`
    t.ok(answer.complete && answer.error === undefined, `${what}: a whole answer, not reset`)
    if (answer.status === 503) {
      t.match(JSON.parse(answer.body || '{}'), { code: 'unavailable' }, `${what}: the drain's 503`)
      t.match(answer.headers['retry-after'], /^\d+$/)
    } else if (i % 3 === 0) {
      t.equal(answer.status, 201, what)
      created.push(`burst-${i}`)
    } else {
      t.equal(answer.status, 302, what)
      redirected++
    }
  }
  t.comment(`${created.length - 1} creates and ${redirected - WARM_VISITS} visits answered during the burst`)
  t.equal(exitCode, 0, 'the process exits cleanly')
  t.same(logLines(server.output()).filter((line) => line.level >= 50), [], 'no error in the log')

  const { prisma } = await database.stored()
  const [{ count }] = await prisma.$queryRawUnsafe<{ count: number }[]>(
    `SELECT count(*)::int AS "count" FROM "analytics"."Visit" WHERE "linkUniq" = $1`,
    uniq,
  )
  t.equal(count, redirected, 'one stored visit per 302, none lost on exit')
  const stored = await prisma.link.findMany({ where: { domain }, select: { slug: true } })
  t.same(stored.map((link) => link.slug).sort(), created.sort(), 'every 201 is stored, and nothing else')
})
