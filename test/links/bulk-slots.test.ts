/**
 * Bulk creates worked on at once (src/links/bulk-slots.ts): the others wait before their body is read, in order,
 * up to a bound and for a bounded time; beyond, 503 with Retry-After at once. Over real HTTP: a request whose body
 * has not arrived yet holds its place, which is how a slow bulk create is made here.
 */
import { connect, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { parseResponse } from '../support/raw-http.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'

const { app, prisma } = await buildTestApp(t, { bulk: { atOnce: 1, waiting: 1, maxWaitMs: 1500 } })
await app.listen({ port: 0, host: '127.0.0.1' })
const { port } = app.server.address() as AddressInfo
const token = await createWorkspaceToken(prisma, { workspace: 'slots', defaultDomain: 'go.slots.test' })

// The token is cached after its first use: a bulk create then reaches its place in a moment.
await app.inject({ method: 'GET', url: '/v1/links?limit=1', headers: { 'api-authorization': token } })

let made = 0
const bodyOf = () => JSON.stringify({ autofill: false, links: [{ url: `https://example.com/${++made}` }] })

interface Pending {
  socket: Socket
  /** Sends the body; the answer follows. */
  finish: () => void
  /** The whole answer, once the server has sent it (the connection is closed after it). */
  answer: Promise<ReturnType<typeof parseResponse>>
  /** Whether any answer has arrived yet. */
  answered: () => boolean
}

/** A bulk create whose head is sent now and its body when `finish` is called. */
function startBulk(headers: Record<string, string> = { 'api-authorization': token }): Pending {
  const body = bodyOf()
  const socket = connect(port, '127.0.0.1')
  let text = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk) => (text += chunk))
  const answer = new Promise<ReturnType<typeof parseResponse>>((resolve) => {
    socket.on('close', () => resolve(parseResponse(text)))
    socket.on('error', () => undefined)
  })
  const head = Object.entries({ ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), connection: 'close' })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')
  socket.write(`POST /v1/links/bulk HTTP/1.1\r\nhost: 127.0.0.1\r\n${head}\r\n`)
  return { socket, finish: () => socket.write(body), answer, answered: () => text.length > 0 }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const stored = () => prisma.link.count({ where: { workspace: { name: 'slots' } } })

t.test('one worked on, one waiting with its body unread, the next answered 503 with Retry-After at once; then both go through', async (t) => {
  const before = await stored()
  const first = startBulk()
  await pause(250)
  const second = startBulk()
  second.finish() // its body is sent, but not read while it waits
  await pause(250)
  const third = await startBulk().answer
  t.equal(third.status, 503)
  t.equal(third.headers['retry-after'], '2')
  t.match(third.headers['content-type'], /^application\/problem\+json/)
  t.match(JSON.parse(third.body), { status: 503, code: 'unavailable', detail: /bulk creates/ })
  t.notOk(second.answered(), 'the second still waits')
  first.finish()
  const [a, b] = await Promise.all([first.answer, second.answer])
  t.equal(a.status, 200)
  t.equal(b.status, 200)
  t.match(JSON.parse(b.body), { results: [{ status: 201 }] })
  t.equal(await stored(), before + 2, 'the refused one stored nothing')
})

t.test('a caller the token check refuses takes no place and waits for none', async (t) => {
  const first = startBulk()
  await pause(250)
  const refused = startBulk({ 'api-authorization': 'not-a-token' })
  refused.finish()
  t.equal((await refused.answer).status, 401)
  first.finish()
  t.equal((await first.answer).status, 200)
})

t.test('a waiting request whose client goes away leaves the line, and its place is not lost', async (t) => {
  const first = startBulk()
  await pause(250)
  const leaving = startBulk()
  await pause(250)
  leaving.socket.destroy()
  await pause(250)
  // The line has room again: this one waits instead of being refused.
  const next = startBulk()
  next.finish()
  await pause(250)
  t.notOk(next.answered(), 'it waits')
  first.finish()
  t.equal((await first.answer).status, 200)
  t.equal((await next.answer).status, 200)
  // Every place is back: one at a time goes straight through.
  const after = startBulk()
  after.finish()
  t.equal((await after.answer).status, 200)
})

t.test('a request waits at most maxWaitMs: then 503 with Retry-After', async (t) => {
  const first = startBulk()
  await pause(250)
  const started = Date.now()
  const waiting = startBulk()
  waiting.finish()
  const answer = await waiting.answer
  const waited = Date.now() - started
  t.equal(answer.status, 503)
  t.equal(answer.headers['retry-after'], '2')
  t.ok(waited >= 1400, `it waited ${waited} ms`)
  first.finish()
  t.equal((await first.answer).status, 200)
})

t.test('a worked-on request whose client goes away gives its place back', async (t) => {
  const first = startBulk()
  await pause(250)
  first.socket.destroy()
  await pause(250)
  const next = startBulk()
  next.finish()
  t.equal((await next.answer).status, 200)
})

t.test('through app.inject too, places are given back once answered', async (t) => {
  for (let i = 0; i < 3; i++) {
    const response = await app.inject({
      method: 'POST',
      url: '/v1/links/bulk',
      headers: { 'api-authorization': token, 'content-type': 'application/json' },
      payload: bodyOf(),
    })
    t.equal(response.statusCode, 200)
  }
})
