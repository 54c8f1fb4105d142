/**
 * Bulk creates stored at once (src/links/bulk-slots.ts): the others wait, in order, up to a bound and for a bounded
 * time; beyond, 503 with Retry-After at once. A place is held for as long as the storing runs, however the request
 * ends, and only then: a client still sending its body, or a batch whose pages autofill is fetching, holds none.
 * A batch is kept storing here by a row lock on its folder, which its INSERT waits for (PostgreSQL only: the
 * embedded database runs one statement at a time; test/concurrency/slots.test.ts covers the line everywhere).
 * The waiting ones go over real HTTP, so that their clients can go away.
 */
import { connect, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { Prisma } from '../../src/generated/prisma/client.js'
import { answerWhenReleased, page, startPageServer } from '../autofill/page-server.js'
import { parseResponse } from '../support/raw-http.js'
import { holdRowLock, waitForLockWaiters } from '../support/row-lock.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { waitFor } from '../support/polling.js'

/** For the tests that hold a batch by a row lock. */
const pgOnly = { skip: process.env.DATABASE_URL ? false : 'a batch held by a row lock: PostgreSQL only' }

const { app, prisma, database } = await buildTestApp(t, { env: { AUTOFILL_ALLOW_PRIVATE: 'true', AUTOFILL_TIMEOUT_MS: '20000' }, bulk: { atOnce: 1, waiting: 1, maxWaitMs: 1500 } })
await app.listen({ port: 0, host: '127.0.0.1' })
const { port } = app.server.address() as AddressInfo
const token = await createWorkspaceToken(prisma, { workspace: 'slots', defaultDomain: 'go.slots.test' })
const pages = await startPageServer(t)
const headers = { 'api-authorization': token, 'content-type': 'application/json' }

let made = 0
const plainBody = () => JSON.stringify({ autofill: false, links: [{ url: `https://example.com/${++made}` }] })

/** A bulk create storing until `release()`: its INSERT waits for its folder's row. Resolves once it holds its place. */
async function holdPlace() {
  const folder = await app.inject({ method: 'POST', url: '/v1/folders', headers, payload: JSON.stringify({ name: `held ${++made}` }) })
  const { id } = folder.json() as { id: number }
  const lock = await holdRowLock(prisma, Prisma.sql`SELECT 1 FROM "Folder" WHERE "id" = ${id} FOR UPDATE`)
  const answer = app.inject({
    method: 'POST',
    url: '/v1/links/bulk',
    headers,
    payload: JSON.stringify({ autofill: false, links: [{ url: `https://example.com/held-${made}`, folderId: id }] }),
  })
  await waitForLockWaiters(prisma, 1)
  return { answer, release: () => lock.release() }
}

interface Raw {
  socket: Socket
  /** Sends the rest of the body. */
  finish: () => void
  /** The answer, once the server has sent it (the connection closes after it). */
  answer: Promise<ReturnType<typeof parseResponse>>
  answered: () => boolean
}

/** A bulk create over a connection of its own: its head and the first `sent` bytes of its body now. */
function rawBulk(options: { token?: string; sent?: number } = {}): Raw {
  const body = plainBody()
  const sent = options.sent ?? body.length
  const socket = connect(port, '127.0.0.1')
  let text = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk) => (text += chunk))
  socket.on('error', () => undefined)
  const answer = new Promise<ReturnType<typeof parseResponse>>((resolve) => socket.on('close', () => resolve(parseResponse(text))))
  socket.write(
    `POST /v1/links/bulk HTTP/1.1\r\nhost: 127.0.0.1\r\napi-authorization: ${options.token ?? token}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body.slice(0, sent)}`,
  )
  return { socket, finish: () => socket.write(body.slice(sent)), answer, answered: () => text.length > 0 }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const stored = () => prisma.link.count({ where: { workspace: { name: 'slots' } } })

t.test('one at work, one waiting, the next answered 503 with Retry-After at once; then both go through', pgOnly, async (t) => {
  const held = await holdPlace()
  const before = await stored()
  const waiting = rawBulk()
  await pause(250)
  const refused = await rawBulk().answer
  t.equal(refused.status, 503)
  t.equal(refused.headers['retry-after'], '2')
  t.match(refused.headers['content-type'], /^application\/problem\+json/)
  t.match(JSON.parse(refused.body), { status: 503, code: 'unavailable', detail: /bulk creates/ })
  t.notOk(waiting.answered(), 'the second still waits')
  t.equal(await stored(), before, 'nothing stored by the waiting or the refused one')
  held.release()
  t.equal((await held.answer).statusCode, 200)
  const second = await waiting.answer
  t.equal(second.status, 200)
  t.match(JSON.parse(second.body), { results: [{ status: 201 }] })
  t.equal(await stored(), before + 2, 'the held and the waiting one stored, the refused one not')
})

t.test('a client that sends its body slowly holds no place', async (t) => {
  const slow = rawBulk({ sent: 10 })
  await pause(250)
  const other = await rawBulk().answer
  t.equal(other.status, 200, 'another goes straight through meanwhile')
  slow.finish()
  t.equal((await slow.answer).status, 200)
})

t.test('a waiting request whose client goes away leaves the line, and the line has room again', pgOnly, async (t) => {
  const held = await holdPlace()
  const leaving = rawBulk()
  await pause(250)
  leaving.socket.destroy()
  await pause(250)
  const next = rawBulk()
  await pause(250)
  t.notOk(next.answered(), 'the next one waits: it was not refused')
  held.release()
  t.equal((await held.answer).statusCode, 200)
  t.equal((await next.answer).status, 200)
})

t.test('a request waits at most maxWaitMs: then 503 with Retry-After', pgOnly, async (t) => {
  const held = await holdPlace()
  const started = Date.now()
  const answer = await rawBulk().answer
  const waited = Date.now() - started
  t.equal(answer.status, 503)
  t.equal(answer.headers['retry-after'], '2')
  t.ok(waited >= 1400, `it waited ${waited} ms`)
  held.release()
  t.equal((await held.answer).statusCode, 200)
})

t.test('the place is held until the storing ends, even when the client has gone; then given back', pgOnly, async (t) => {
  const folder = await app.inject({ method: 'POST', url: '/v1/folders', headers, payload: JSON.stringify({ name: 'gone' }) })
  const { id } = folder.json() as { id: number }
  const lock = await holdRowLock(prisma, Prisma.sql`SELECT 1 FROM "Folder" WHERE "id" = ${id} FOR UPDATE`)
  const body = JSON.stringify({ autofill: false, links: [{ url: 'https://example.com/gone', folderId: id }] })
  const gone = connect(port, '127.0.0.1')
  gone.on('error', () => undefined)
  gone.write(
    `POST /v1/links/bulk HTTP/1.1\r\nhost: 127.0.0.1\r\napi-authorization: ${token}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  )
  await waitForLockWaiters(prisma, 1)
  gone.destroy()
  await pause(250)
  const waiting = rawBulk()
  await pause(250)
  t.notOk(waiting.answered(), 'the storing of the client that left still holds the place')
  await lock.release()
  t.equal((await waiting.answer).status, 200, 'given back once that storing ended')
  t.equal((await rawBulk().answer).status, 200, 'and nothing is left held')
  t.equal(await prisma.link.count({ where: { folderId: id } }), 1, 'the batch of the client that left was stored')
})

t.test('a batch whose pages autofill is fetching holds no place; nor do links that all fail their checks', pgOnly, async (t) => {
  const slow = answerWhenReleased(t, page('<!doctype html><title>Slow</title>'))
  pages.route('/slow', slow.handler)
  const filling = app.inject({ method: 'POST', url: '/v1/links/bulk', headers, payload: JSON.stringify({ autofill: true, links: [{ url: pages.url('/slow') }] }) })
  t.ok(await waitFor(() => pages.requests('/slow').length > 0, 5000), 'autofill is fetching the page')
  t.equal((await rawBulk().answer).status, 200, 'another batch is stored meanwhile')
  const held = await holdPlace()
  const invalid = await app.inject({ method: 'POST', url: '/v1/links/bulk', headers, payload: JSON.stringify({ autofill: false, links: [{ url: 'nope' }] }) })
  t.equal(invalid.statusCode, 200, 'a batch with nothing to store does not wait for the place')
  t.match(invalid.json(), { results: [{ status: 400 }] })
  await held.release()
  t.equal((await held.answer).statusCode, 200)
  slow.release()
  t.equal((await filling).statusCode, 200)
})

t.test('clients that close at once, or with bulk creates pipelined behind another, leave no place taken', async (t) => {
  for (let i = 0; i < 5; i++) rawBulk().socket.destroy()
  const bodies = [plainBody(), plainBody(), plainBody()]
  const pipelined = connect(port, '127.0.0.1')
  pipelined.on('error', () => undefined)
  pipelined.write(bodies.map((body) =>
    `POST /v1/links/bulk HTTP/1.1\r\nhost: 127.0.0.1\r\napi-authorization: ${token}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`).join(''))
  await pause(30)
  pipelined.destroy()
  await pause(500)
  for (let i = 0; i < 2; i++) t.equal((await rawBulk().answer).status, 200, 'the place is free: no wait, no 503')
})

t.test('answers before the work (401, 400) take no place; app.inject gives every place back too', pgOnly, async (t) => {
  const held = await holdPlace()
  t.equal((await rawBulk({ token: 'not-a-token' }).answer).status, 401)
  const badEnvelope = await app.inject({
    method: 'POST',
    url: '/v1/links/bulk',
    headers,
    payload: '{"links": []}',
  })
  t.equal(badEnvelope.statusCode, 400)
  held.release()
  await held.answer
  for (let i = 0; i < 3; i++) {
    const response = await app.inject({
      method: 'POST',
      url: '/v1/links/bulk',
      headers: { 'api-authorization': token, 'content-type': 'application/json' },
      payload: plainBody(),
    })
    t.equal(response.statusCode, 200)
  }
})

t.test('a batch over its quota has nothing to store: it is answered at once, not after the place', pgOnly, async (t) => {
  const spent = await createWorkspaceToken(prisma, { workspace: 'slots-spent', defaultDomain: 'go.slots-spent.test' })
  await setLimits(prisma, { workspace: 'slots-spent', hour: 1 })
  const first = await app.inject({ method: 'POST', url: '/v1/links/bulk', headers: { ...headers, 'api-authorization': spent }, payload: plainBody() })
  t.match(first.json(), { results: [{ status: 201 }] })
  const held = await holdPlace()
  const started = Date.now()
  const over = await app.inject({ method: 'POST', url: '/v1/links/bulk', headers: { ...headers, 'api-authorization': spent }, payload: plainBody() })
  t.equal(over.statusCode, 200)
  t.match(over.json(), { results: [{ status: 429, problem: { code: 'rate_limited' } }] })
  t.ok(Date.now() - started < 1000, 'at once')
  await held.release()
  t.equal((await held.answer).statusCode, 200)
})

t.test('once the instance is closing, the waiting batches are answered 503 at once and store nothing', pgOnly, async (t) => {
  const { app: closing } = await buildTestApp(t, { database, bulk: { atOnce: 1, waiting: 5, maxWaitMs: 20_000 } })
  await closing.listen({ port: 0, host: '127.0.0.1' })
  const closingPort = (closing.server.address() as AddressInfo).port
  const folder = await closing.inject({ method: 'POST', url: '/v1/folders', headers, payload: JSON.stringify({ name: 'closing' }) })
  const { id } = folder.json() as { id: number }
  const lock = await holdRowLock(prisma, Prisma.sql`SELECT 1 FROM "Folder" WHERE "id" = ${id} FOR UPDATE`)
  const post = (links: unknown[]) =>
    fetch(`http://127.0.0.1:${closingPort}/v1/links/bulk`, { method: 'POST', headers, body: JSON.stringify({ autofill: false, links }) })
  const holding = post([{ url: 'https://example.com/closing-held', folderId: id }])
  await waitForLockWaiters(prisma, 1)
  const waiting = post([{ url: 'https://example.com/closing-waiting', id: 'closing-waiting' }])
  await pause(250)
  const closed = closing.close()
  const started = Date.now()
  const refused = await waiting
  t.equal(refused.status, 503)
  t.equal(refused.headers.get('retry-after'), '1')
  t.match(await refused.json(), { code: 'unavailable', detail: /shutting down/ })
  t.ok(Date.now() - started < 2000, 'answered as the close began')
  await lock.release()
  t.equal((await holding).status, 200, 'the batch being stored is finished')
  await closed
  t.equal(await prisma.link.count({ where: { slug: 'closing-waiting' } }), 0, 'nothing stored for the one sent away')
})

t.test("a batch's pages are fetched 8 at a time, the next as soon as any one is done (not once the 8 are)", async (t) => {
  const held = Array.from({ length: 10 }, (_, i) => {
    const page_ = answerWhenReleased(t, page(`<!doctype html><title>Page ${i}</title>`))
    pages.route(`/pool/${i}`, page_.handler)
    return page_
  })
  const fetched = () => held.filter((_, i) => pages.requests(`/pool/${i}`).length > 0).length
  const answer = app.inject({
    method: 'POST',
    url: '/v1/links/bulk',
    headers,
    payload: JSON.stringify({ autofill: true, links: held.map((_, i) => ({ url: pages.url(`/pool/${i}`) })) }),
  })
  t.ok(await waitFor(() => fetched() === 8, 5000), 'eight fetches under way')
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(fetched(), 8, 'and no more')
  held[3].release()
  t.ok(await waitFor(() => fetched() === 9, 5000), 'one done: the ninth starts while seven are still waiting')
  for (const page_ of held) page_.release()
  const response = await answer
  t.equal(response.statusCode, 200)
  t.same(response.json().results.map((result: { link: { title: string } }) => result.link.title), held.map((_, i) => `Page ${i}`))
})
