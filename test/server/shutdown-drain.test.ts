/**
 * Issue 9, item 16: SIGTERM in the middle of a burst. Every connection the server accepted gets a whole
 * HTTP answer (the request done, or a clean 503 that says to retry elsewhere and closes the connection),
 * none is reset, and the process exits 0. Whatever the timing: the assertions hold however many requests
 * were served before the signal.
 */
import { once } from 'node:events'
import type { Socket } from 'node:net'
import t from 'tap'
import { openConnection, parseResponse, readUntilClosed } from '../support/raw-http.js'
import { logLines, serverDatabase, startServer } from '../support/server-process.js'

const CONNECTIONS = 50

/** Reads one keep-alive answer from `socket` and leaves the connection open. */
async function readOneAnswer(socket: Socket): Promise<number> {
  let text = ''
  const onData = (chunk: Buffer) => (text += chunk.toString('latin1'))
  socket.on('data', onData)
  while (!parseResponse(text).complete) await once(socket, 'data')
  socket.off('data', onData)
  return parseResponse(text).status
}

function createRequest(token: string, i: number): string {
  const body = JSON.stringify({ link: { url: `https://example.com/burst/${i}`, id: `burst-${i}` }, autofill: false })
  return (
    `POST /v1/links/create HTTP/1.1\r\nHost: api.burst.test\r\nApi-Authorization: ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  )
}

/** One request in five creates a link (and checks what is stored), the others read one (404: none exists). */
function burstRequest(token: string, i: number): string {
  if (i % 5 === 0) return createRequest(token, i)
  return `GET /v1/links/${900_000 + i} HTTP/1.1\r\nHost: api.burst.test\r\nApi-Authorization: ${token}\r\n\r\n`
}

t.test('item 16: SIGTERM during a burst of 50 connections: each gets a whole answer, none is reset', async (t) => {
  const database = await serverDatabase(t)
  const server = await startServer(database.env)
  t.teardown(() => server.child.kill('SIGKILL'))
  const token = database.token(server.output())

  // Opened at once on a server that has served nothing yet, so many are still unread when the signal comes.
  const sockets = await Promise.all(Array.from({ length: CONNECTIONS }, () => openConnection(server.port)))

  const answers = sockets.map((socket) => readUntilClosed(socket))
  sockets.forEach((socket, i) => socket.write(burstRequest(token, i)))
  server.child.kill('SIGTERM')
  const [exitCode] = await once(server.child, 'exit')

  const settled = await Promise.all(answers)
  const created: number[] = []
  settled.forEach((answer, i) => {
    const what = `connection ${i}: ${answer.status} ${answer.error ?? ''}`
    t.equal(answer.error, undefined, `${what}: not reset`)
    t.ok(answer.complete, `${what}: a whole answer`)
    if (answer.status === 201 || answer.status === 404) {
      if (answer.status === 201) created.push(i)
      t.equal(answer.status, i % 5 === 0 ? 201 : 404, `${what}: the request's own answer`)
      return
    }
    t.equal(answer.status, 503, `${what}: its own answer, or 503`)
    t.match(answer.headers['content-type'], /^application\/problem\+json/, `${what}: problem+json`)
    const problem = JSON.parse(answer.body || '{}')
    t.match(problem, { status: 503, code: 'unavailable' })
    t.match(answer.headers['retry-after'], /^\d+$/, `${what}: Retry-After`)
    if (/shutting down/.test(problem.detail)) t.equal(answer.headers.connection, 'close', `${what}: Connection: close`)
  })
  t.comment(`${settled.filter((answer) => answer.status !== 503).length} answered, ${settled.filter((answer) => answer.status === 503).length} answered 503`)
  t.equal(exitCode, 0, 'the process exits cleanly')
  t.same(logLines(server.output()).filter((line) => line.level >= 50), [], 'no error in the log')

  // Every 201 is stored, and nothing else.
  const { prisma } = await database.stored()
  const stored = await prisma.link.findMany({ where: { url: { startsWith: 'https://example.com/burst/' } }, select: { slug: true } })
  t.same(stored.map((link) => link.slug).sort(), created.map((i) => `burst-${i}`).sort())
})

t.test('item 16: a request in flight on a kept-alive connection is answered, then the connection closes and the process exits', async (t) => {
  const database = await serverDatabase(t)
  const server = await startServer(database.env)
  t.teardown(() => server.child.kill('SIGKILL'))
  const token = database.token(server.output())

  const socket = await openConnection(server.port)
  socket.write('GET /healthz HTTP/1.1\r\nHost: api.burst.test\r\n\r\n')
  t.equal(await readOneAnswer(socket), 200, 'a first request, and the connection is kept alive')

  // The next request's body stops half way, so it is in flight when SIGTERM arrives.
  const request = createRequest(token, 1000)
  const split = request.length - 10
  const answer = readUntilClosed(socket)
  socket.write(request.slice(0, split))
  await new Promise((resolve) => setTimeout(resolve, 300))
  server.child.kill('SIGTERM')
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal(server.child.exitCode, null, 'the process waits for the request in flight')
  socket.write(request.slice(split))

  const { status, headers, complete, error } = await answer
  t.equal(status, 201)
  t.ok(complete, 'a whole answer')
  t.equal(error, undefined, 'not reset')
  t.equal(headers.connection, 'close', 'and the server closes the connection after it')
  const [exitCode] = await once(server.child, 'exit')
  t.equal(exitCode, 0, 'the process exits cleanly, without waiting for the keep-alive timeout')
  t.same(logLines(server.output()).filter((line) => line.level >= 50), [], 'no error in the log')
  const { prisma } = await database.stored()
  t.equal(await prisma.link.count({ where: { slug: 'burst-1000' } }), 1, 'the link is stored')
})

t.test('new connections keep coming across SIGTERM: each is answered or refused, none cut', async (t) => {
  const database = await serverDatabase(t)
  const server = await startServer(database.env)
  t.teardown(() => server.child.kill('SIGKILL'))
  const outcomes: Record<string, number> = {}
  let exited = false
  const exit = once(server.child, 'exit').then(([code]) => {
    exited = true
    return code
  })
  // Six clients, each opening a connection per request until the process is gone.
  const client = async () => {
    while (!exited) {
      let outcome: string
      try {
        const socket = await openConnection(server.port)
        const answer = readUntilClosed(socket)
        socket.write('GET /healthz HTTP/1.1\r\nHost: api.burst.test\r\nConnection: close\r\n\r\n')
        const { status, complete, error } = await answer
        outcome = error ?? (complete ? String(status) : 'incomplete')
      } catch (error) {
        outcome = (error as NodeJS.ErrnoException).code ?? String(error)
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
    }
  }
  const clients = Array.from({ length: 6 }, client)
  await new Promise((resolve) => setTimeout(resolve, 300))
  server.child.kill('SIGTERM')
  t.equal(await exit, 0, 'the process exits cleanly')
  await Promise.all(clients)
  t.comment(JSON.stringify(outcomes))
  // A reset shows as ECONNRESET, or as EPIPE when it reaches the client while it is still writing its request.
  const unexpected = Object.keys(outcomes).filter((outcome) => !['200', '503', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE'].includes(outcome))
  t.same(unexpected, [], 'a 200, a 503, or refused once the server stopped listening: no cut answer')
  t.ok(outcomes['503'] > 0, 'connections made during the close (a second at least) are answered 503')
  // The kernel resets a connection it completed but Node had not accepted yet when the listening socket closed:
  // about a millisecond of six clients' connections among the thousands made during the close.
  const resets = (outcomes.ECONNRESET ?? 0) + (outcomes.EPIPE ?? 0)
  t.ok(resets <= Math.max(3, outcomes['503'] / 1000), `resets only at the instant the server stops listening (${resets})`)
})

t.test('a client sending its body a byte at a time does not hold the close past its time: the process exits 0', async (t) => {
  const database = await serverDatabase(t)
  const server = await startServer(database.env)
  t.teardown(() => server.child.kill('SIGKILL'))
  const token = database.token(server.output())
  const socket = await openConnection(server.port)
  socket.on('error', () => {})
  const request = createRequest(token, 2000)
  const head = request.indexOf('\r\n\r\n') + 4
  socket.write(request.slice(0, head))
  const dribble = setInterval(() => socket.writable && socket.write('{'), 500)
  t.teardown(() => clearInterval(dribble))
  await new Promise((resolve) => setTimeout(resolve, 300))
  const signalled = Date.now()
  server.child.kill('SIGTERM')
  const [exitCode] = await once(server.child, 'exit')
  t.equal(exitCode, 0, 'a clean exit, not the kill after 10 s')
  t.ok(Date.now() - signalled < 9000, `within the close's time (${Date.now() - signalled} ms)`)
  t.notMatch(server.output(), /killed by timeout/)
})
