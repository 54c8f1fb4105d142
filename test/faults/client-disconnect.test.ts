/**
 * Issue 14, item 4: clients that go away mid-request. A create whose body stops half way and whose connection is
 * then destroyed stores nothing; creates whose connection is destroyed right after the whole body was sent, while
 * they are in flight, are stored or not, but each stored one used one slot of the quota and no other did; the
 * server logs no 500 and no error, and serves on.
 */
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { openConnection } from '../support/raw-http.js'
import { buildTestApp, client, createWorkspaceToken } from '../support/test-app.js'
import { waitFor } from '../support/polling.js'

const HOUR_LIMIT = 8
const IN_FLIGHT = 4

const lines: Record<string, any>[] = []
// At `debug`, the app logs each request as it arrives (at `info` only once answered): the sign that one arrived.
const { app, prisma } = await buildTestApp(t, { logger: { level: 'debug', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } } })
const token = await createWorkspaceToken(prisma, { workspace: 'leaving', defaultDomain: 'go.leaving.test' })
await setLimits(prisma, { workspace: 'leaving', hour: HOUR_LIMIT })
await app.listen({ port: 0, host: '127.0.0.1' })
const { port } = app.server.address() as AddressInfo

/** The request head of a create with `id` (and its request id), and its body. */
function createRequest(id: string): { head: string; body: string } {
  const body = JSON.stringify({ link: { id, url: `https://example.com/${id}` }, autofill: false })
  const head =
    `POST /v1/links/create HTTP/1.1\r\nHost: api.leaving.test\r\nApi-Authorization: ${token}\r\nX-Request-Id: ${id}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`
  return { head, body }
}

/** True once the app answered the request `id` 400 because its connection closed before the body was complete. */
const refusedForLeaving = (id: string) => lines.some((line) => line.reqId === id && /connection closed before the request was complete/.test(line.msg ?? ''))
const serverErrors = () => lines.filter((line) => line.level >= 50 || line.res?.statusCode >= 500)

t.test('a body half sent, then the connection destroyed: nothing stored, no error, the server serves on', async (t) => {
  const { head, body } = createRequest('half')
  const socket = await openConnection(port)
  socket.write(head + body.slice(0, body.length >> 1))
  t.ok(await waitFor(() => lines.some((line) => line.reqId === 'half')), 'the request arrived')
  socket.destroy()
  t.ok(await waitFor(() => refusedForLeaving('half')), 'the app gave up on it (a 400 nobody reads)')
  t.equal(await prisma.link.count({ where: { slug: 'half' } }), 0, 'nothing stored')
  t.same(serverErrors(), [], 'no 500, no error logged')
  t.equal((await client(app, token).create({ id: 'next', url: 'https://example.com/next' }, { autofill: false })).statusCode, 201, 'the next create is served')
})

t.test('whole bodies sent, then the connections destroyed while the creates are in flight: stored or not, the quota agrees', async (t) => {
  const ids = Array.from({ length: IN_FLIGHT }, (_, i) => `gone-${i}`)
  await Promise.all(
    ids.map(async (id) => {
      const { head, body } = createRequest(id)
      const socket = await openConnection(port)
      socket.on('error', () => {})
      socket.write(head + body, () => socket.destroy())
    }),
  )
  // Fastify logs nothing for a request whose client left before its answer: a create is done once its link is
  // stored (its slot is then kept), or once it was refused for the closed connection (its slot is then given back).
  const done = async () => {
    const stored = new Set((await prisma.link.findMany({ where: { slug: { in: ids } }, select: { slug: true } })).map((link) => link.slug))
    return ids.every((id) => stored.has(id) || refusedForLeaving(id))
  }
  t.ok(await waitFor(done), 'the app is done with each of them')
  await sleep(200)
  const gone = await prisma.link.count({ where: { slug: { in: ids } } })
  t.comment(`${gone} of ${IN_FLIGHT} stored`)
  t.same(serverErrors(), [], 'no 500, no error logged')

  // Each stored link took one slot and each one not stored gave its slot back: what is left is exactly the rest.
  const stored = () => prisma.link.count({ where: { workspace: { name: 'leaving' } } })
  const before = await stored()
  const statuses: number[] = []
  for (let i = 0; i < HOUR_LIMIT + 2 && !statuses.includes(429); i++) {
    statuses.push((await client(app, token).create({ url: `https://example.com/fill/${i}` }, { autofill: false })).statusCode)
  }
  t.equal(statuses.filter((status) => status === 201).length, HOUR_LIMIT - before, `the quota had ${HOUR_LIMIT - before} slots left, one per link not stored`)
  t.equal(statuses.at(-1), 429, 'then it is used up')
  t.equal(await stored(), HOUR_LIMIT, 'stored links = the quota')
  t.same(serverErrors(), [])
})
