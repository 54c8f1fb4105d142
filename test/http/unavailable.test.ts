/**
 * Issue 9, item 15 (503s) and item 2 (a busy database): every 503 says when to come back (Retry-After) and is
 * problem+json; contention is a 503 logged as a warning, never a 500 or an error line.
 */
import type { LightMyRequestResponse } from 'fastify'
import { connect } from 'node:net'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { buildApp } from '../../src/app.js'
import { openDatabase, type Database } from '../../src/db/database.js'
import { RETRY_AFTER_UNAVAILABLE_SECONDS } from '../../src/errors/app-error.js'
import { SHUTDOWN_RETRY_AFTER_SECONDS } from '../../src/errors/http-errors.js'
import { buildTestApp, client, createWorkspaceToken, testAutofill, testConfig } from '../support/test-app.js'

const { app, prisma } = await buildTestApp(t)
const token = await createWorkspaceToken(prisma, { workspace: 'down', defaultDomain: 'go.down.test' })

function assertUnavailable(t: Test, response: LightMyRequestResponse, detail: RegExp) {
  t.equal(response.statusCode, 503)
  t.match(response.headers['content-type'], /^application\/problem\+json/)
  t.match(response.json(), { status: 503, code: 'unavailable', detail })
  t.equal(response.headers['retry-after'], String(RETRY_AFTER_UNAVAILABLE_SECONDS))
}

/** Log lines (JSON) of an app. */
function capturedLogger() {
  const lines: Record<string, any>[] = []
  return { lines, logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } } }
}

t.test('the database cannot be reached: the API and /readyz answer 503 with Retry-After', async (t) => {
  const unreachable = await openDatabase({ databaseUrl: 'postgresql://postgres@127.0.0.1:9/none', dataDir: 'unused', migrate: false })
  const broken = await buildApp({ config: testConfig(), database: unreachable, closeDatabase: true, logger: false, autofill: testAutofill() })
  t.teardown(() => broken.close())
  assertUnavailable(t, await client(broken, token).create({ url: 'https://example.com/' }), /cannot reach its database/)
  const ready = await broken.inject('/readyz')
  t.equal(ready.statusCode, 503)
  t.equal(ready.headers['retry-after'], String(RETRY_AFTER_UNAVAILABLE_SECONDS))
  t.same(ready.json(), { status: 'database unreachable' })
})

t.test('a busy database (no transaction in time, a deadlock that outlasted the retries) is a 503 and a warning', async (t) => {
  const busyErrors = [
    Object.assign(new Error('Transaction API error: Unable to start a transaction in the given time.'), { code: 'P2028' }),
    Object.assign(new Error('Transaction failed due to a write conflict or a deadlock. Please retry your transaction'), { code: 'P2034' }),
    Object.assign(new Error('Raw query failed. Code: `40P01`.'), {
      code: 'P2010',
      meta: { driverAdapterError: { cause: { originalCode: '40P01' } } },
    }),
  ]
  for (const busy of busyErrors) {
    const database = {
      kind: 'postgres',
      ping: async () => true,
      pools: () => [],
      interrupt: () => {},
      close: async () => {},
      prisma: {
        apiToken: {
          findUnique: async () => {
            throw busy
          },
        },
      },
    } as unknown as Database
    const log = capturedLogger()
    const busyApp = await buildApp({ config: testConfig(), database, logger: log.logger, autofill: testAutofill() })
    t.teardown(() => busyApp.close())
    assertUnavailable(t, await client(busyApp, token).create({ url: 'https://example.com/' }), /database is busy/)
    t.same(log.lines.filter((line) => line.level >= 50), [], `${busy.message}: no error line`)
    t.ok(log.lines.some((line) => line.level === 40 && line.err?.message === busy.message), 'a warning with the cause')
  }
})

t.test('while the app closes: the request in flight is answered and closes its connection; a new one gets 503', async (t) => {
  const closing = await buildTestApp(t)
  const closingToken = await createWorkspaceToken(closing.prisma, { workspace: 'closing', defaultDomain: 'go.closing.test' })
  let arrived = false
  closing.app.addHook('preParsing', async (_request, _reply, payload) => {
    arrived = true
    return payload
  })
  await closing.app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = closing.app.server.address() as AddressInfo

  // A create whose body is still uploading keeps the app from finishing its close.
  const socket = connect(port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  let received = ''
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk))
  const body = JSON.stringify({ link: { url: 'https://example.com/in-flight' }, autofill: false })
  socket.write(
    `POST /v1/links/create HTTP/1.1\r\nHost: go.closing.test\r\nApi-Authorization: ${closingToken}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
  )
  for (let i = 0; !arrived; i++) {
    if (i > 1000) throw new Error('the request never arrived')
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  const closed = closing.app.close()
  // A request on a new connection while the first one is still in flight (src/plugins/graceful-close.ts).
  const late = await new Promise<string>((resolve) => {
    const second = connect(port, '127.0.0.1')
    let text = ''
    second.setEncoding('utf8').on('data', (chunk: string) => (text += chunk))
    second.once('close', () => resolve(text))
    second.write(`GET /v1/links HTTP/1.1\r\nHost: go.closing.test\r\nApi-Authorization: ${closingToken}\r\n\r\n`)
  })
  socket.write(body.slice(10))
  await new Promise((resolve) => socket.once('close', resolve))
  await closed

  t.match(received, /^HTTP\/1\.1 201 /, 'the request in flight is answered')
  t.match(received, /\r\nconnection: close\r\n/i, 'and its connection closes with it')
  t.match(late, /^HTTP\/1\.1 503 /, 'the late one is refused')
  t.match(late, /\r\ncontent-type: application\/problem\+json/i)
  t.match(late, new RegExp(`\\r\\nretry-after: ${SHUTDOWN_RETRY_AFTER_SECONDS}\\r\\n`, 'i'))
  t.match(late, /\r\nconnection: close\r\n/i)
  t.match(late, /"code":"unavailable"/)
})
