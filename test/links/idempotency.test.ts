/**
 * Idempotency-Key on create and bulk create (issue 14; draft-ietf-httpapi-idempotency-key-header), through the
 * API, on each store: the database store always (PostgreSQL when DATABASE_URL is set, else the embedded
 * database), Redis too when REDIS_URL is set. What the client sees (status, headers, body) and what is stored
 * (links, keys, quota).
 */
import type { FastifyInstance } from 'fastify'
import type { AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import t from 'tap'
import { MemoryQuotaStore } from '../../src/rate-limits/memory-store.js'
import type { QuotaStore } from '../../src/rate-limits/quota-store.js'
import { ANSWER_TTL_MS, CLAIM_LEASE_MS } from '../../src/idempotency/idempotency-store.js'
import { parseIdempotencyKey, requestFingerprint } from '../../src/idempotency/idempotency-key.js'
import { IdempotencyKeyHeaders } from '../../src/plugins/openapi-idempotency.js'
import { SWEEP_INTERVAL_MS } from '../../src/idempotency/postgres-store.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { FakeClock, quotaHeaders, quotaWorkspace, REDIS_URL, redisKeyPrefix, T0 } from '../rate-limits/quota-support.js'
import { rawRequest } from '../support/raw-http.js'
import { buildTestApp, openTestDatabase } from '../support/test-app.js'
import { answerHeaders, BULK, CREATE, heldPage, keyRows, post, redisKey, replayed } from './idempotency-support.js'
import { waitFor } from '../support/polling.js'

const { database } = await openTestDatabase(t)
const { prisma } = database
const clock = new FakeClock()
// Autofill may reach the held page on loopback, and waits for it longer than any test holds it.
const env = { AUTOFILL_ALLOW_PRIVATE: 'true', AUTOFILL_TIMEOUT_MS: '30000' }

interface Setup {
  store: 'database' | 'redis'
  app: FastifyInstance
  keyPrefix: string
}
const setups: Setup[] = [
  {
    store: 'database',
    keyPrefix: '',
    app: (await buildTestApp(t, { database, env, idempotency: { now: clock.now }, rateLimits: { limitsCacheMs: 0 } })).app,
  },
]
if (REDIS_URL) {
  const keyPrefix = redisKeyPrefix(t)
  const { app } = await buildTestApp(t, {
    database,
    env: { ...env, REDIS_URL },
    idempotency: { keyPrefix },
    rateLimits: { keyPrefix, limitsCacheMs: 0 },
  })
  setups.push({ store: 'redis', app, keyPrefix })
}

const linksOf = (workspace: string) => prisma.link.count({ where: { workspace: { name: workspace } } })
const page = (n: number | string) => `https://example.com/retry/${n}`

for (const { store, app, keyPrefix } of setups) {
  t.test(`${store} store`, async (t) => {
    t.equal(app.idempotency.storeKind, store)

    t.test('the same key and body: the first answer again, nothing created, no quota taken', async (t) => {
      clock.set(T0)
      const ws = await quotaWorkspace(prisma, `${store} replay`, { hour: 10 })
      const body = { link: { url: page(1), id: 'once', title: 'Once' }, autofill: false }
      const first = await post(app, ws.token, CREATE, body, 'key-1')
      t.equal(first.statusCode, 201)
      t.equal(replayed(first), undefined, 'the first answer is no replay')
      t.equal(quotaHeaders(first).remaining, '9')

      for (const key of ['key-1', '"key-1"']) {
        const again = await post(app, ws.token, CREATE, body, key)
        t.equal(again.statusCode, 201, `${key}: the same status`)
        t.equal(again.body, first.body, `${key}: the same body, byte for byte`)
        t.same(answerHeaders(again), answerHeaders(first), `${key}: Content-Type, Location and X-Autofill again`)
        t.equal(replayed(again), 'true', `${key}: marked as a replay`)
        t.not(again.headers['x-request-id'], first.headers['x-request-id'], `${key}: a request id of its own`)
        const { policy, remaining } = quotaHeaders(again)
        t.same({ policy, remaining }, { policy: quotaHeaders(first).policy, remaining: '9' }, `${key}: the quota as it stands: nothing taken`)
      }
      t.equal(await linksOf(ws.name), 1, 'one link')
      // The quota counted the one create only: nine more fit, the tenth of them does not.
      for (let i = 0; i < 9; i++) t.equal((await post(app, ws.token, CREATE, { link: { url: page(`q${i}`) }, autofill: false })).statusCode, 201)
      t.equal((await post(app, ws.token, CREATE, { link: { url: page('q9') }, autofill: false })).statusCode, 429)

      if (store === 'database') {
        const [row] = await keyRows(database, first.json().workspaceId)
        t.match(row, { key: 'key-1', status: 201, claimToken: null })
        t.equal(row.expiresAt.getTime(), T0 + ANSWER_TTL_MS, 'kept for 24 h')
      } else {
        const { value, ttl } = await redisKey(REDIS_URL!, keyPrefix, first.json().workspaceId, 'key-1')
        t.match(value, { status: 201, body: first.body })
        t.ok(ttl > ANSWER_TTL_MS - 60_000 && ttl <= ANSWER_TTL_MS, `kept for 24 h (${ttl} ms left)`)
      }
    })

    t.test('without a key nothing changes: each request creates, nothing is kept', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} keyless`, {})
      const body = { link: { url: page('k') }, autofill: false }
      const [a, b] = [await post(app, ws.token, CREATE, body), await post(app, ws.token, CREATE, body)]
      t.same([a.statusCode, b.statusCode], [201, 201])
      t.not(a.json().uniq, b.json().uniq)
      t.equal(replayed(b), undefined)
      t.equal(await linksOf(ws.name), 2)
      if (store === 'database') t.same(await keyRows(database, a.json().workspaceId), [], 'no key stored')
    })

    t.test('the same key with another body, or on the other operation: 422, nothing created', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} mismatch`, {})
      t.equal((await post(app, ws.token, CREATE, { link: { url: page(2) }, autofill: false }, 'reused')).statusCode, 201)
      const changed = await post(app, ws.token, CREATE, { link: { url: page(3) }, autofill: false }, 'reused')
      t.equal(changed.statusCode, 422)
      t.match(changed.headers['content-type'], /^application\/problem\+json/)
      t.match(changed.json(), { status: 422, title: 'Unprocessable Entity', code: 'idempotency_key_reused', detail: /different body/ })
      // Another serialisation of the same JSON is another request: bytes are compared, not meanings.
      const respaced = await post(app, ws.token, CREATE, `{ "link": { "url": "${page(2)}" }, "autofill": false }`, 'reused')
      t.equal(respaced.statusCode, 422)
      const bulk = await post(app, ws.token, BULK, { links: [{ url: page(2) }], autofill: false }, 'reused')
      t.equal(bulk.statusCode, 422, 'the key of a create sent to bulk create')
      t.equal(await linksOf(ws.name), 1)
    })

    t.test('keys are per workspace', async (t) => {
      const a = await quotaWorkspace(prisma, `${store} ws a`, {})
      const b = await quotaWorkspace(prisma, `${store} ws b`, {})
      const body = { link: { url: page(4), id: 'same' }, autofill: false }
      const [fromA, fromB] = [await post(app, a.token, CREATE, body, 'shared'), await post(app, b.token, CREATE, body, 'shared')]
      t.same([fromA.statusCode, fromB.statusCode], [201, 201], 'each workspace creates its own link')
      t.not(fromA.json().uniq, fromB.json().uniq)
      t.equal((await post(app, b.token, CREATE, body, 'shared')).body, fromB.body, "b's replay is b's answer")
      t.equal((await post(app, a.token, CREATE, body, 'shared')).body, fromA.body, "a's replay is a's answer")
      // Another body under the same key in a third workspace is no mismatch there.
      const c = await quotaWorkspace(prisma, `${store} ws c`, {})
      t.equal((await post(app, c.token, CREATE, { link: { url: page(5) }, autofill: false }, 'shared')).statusCode, 201)
    })

    t.test('final client errors are kept and replayed: 400 of the link rules, 409 slug taken', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} client errors`, {})
      const bad = { link: { url: 'javascript:alert(1)' }, autofill: false }
      const refused = await post(app, ws.token, CREATE, bad, 'bad-body')
      t.equal(refused.statusCode, 400)
      const again = await post(app, ws.token, CREATE, bad, 'bad-body')
      t.same([again.statusCode, again.body, replayed(again)], [400, refused.body, 'true'])
      t.equal(again.headers['content-type'], refused.headers['content-type'])

      t.equal((await post(app, ws.token, CREATE, { link: { url: page(6), id: 'taken' }, autofill: false })).statusCode, 201)
      const taken = { link: { url: page(7), id: 'taken' }, autofill: false }
      const conflict = await post(app, ws.token, CREATE, taken, 'taken-key')
      t.match([conflict.statusCode, conflict.json().code], [409, 'slug_taken'])
      // Even once the slug is free again, the key's answer is the 409: the request was answered.
      await prisma.link.deleteMany({ where: { workspace: { name: ws.name } } })
      const replay = await post(app, ws.token, CREATE, taken, 'taken-key')
      t.same([replay.statusCode, replay.body, replayed(replay)], [409, conflict.body, 'true'])
      t.equal(await linksOf(ws.name), 0)
    })

    t.test('429 is not kept: once the quota allows, the same request really runs', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} quota`, { hour: 0 })
      const body = { link: { url: page(8) }, autofill: false }
      const limited = await post(app, ws.token, CREATE, body, 'after-429')
      t.equal(limited.statusCode, 429)
      t.equal((await post(app, ws.token, CREATE, body, 'after-429')).statusCode, 429, 'still 429, not a replay of it')
      await setLimits(prisma, { workspace: ws.name, hour: 5 })
      const created = await post(app, ws.token, CREATE, body, 'after-429')
      t.equal(created.statusCode, 201)
      t.equal(replayed(created), undefined)
      t.equal((await post(app, ws.token, CREATE, body, 'after-429')).body, created.body, 'and that answer is kept')
      t.equal(await linksOf(ws.name), 1)
    })

    t.test('a request in progress: the same request gets 409, another body 422; then the answer', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} in progress`, {})
      const held = await heldPage(t)
      const body = { link: { url: held.url, id: 'slow' } }
      const first = post(app, ws.token, CREATE, body, 'slow-key')
      t.ok(await held.fetched(), 'the first request waits for its page')

      const concurrent = await post(app, ws.token, CREATE, body, 'slow-key')
      t.equal(concurrent.statusCode, 409)
      t.equal(concurrent.headers['retry-after'], '1')
      t.match(concurrent.json(), { status: 409, code: 'idempotency_key_in_use' })
      const other = await post(app, ws.token, CREATE, { link: { url: page(9) } }, 'slow-key')
      t.equal(other.statusCode, 422, 'another body under the key in progress')
      t.equal(await linksOf(ws.name), 0, 'nothing created yet')

      held.release()
      const answer = await first
      t.equal(answer.statusCode, 201)
      t.match(answer.json(), { id: 'slow', title: 'Held page' })
      t.equal(answer.headers['x-autofill'], 'partial')
      const replay = await post(app, ws.token, CREATE, body, 'slow-key')
      t.same([replay.statusCode, replay.body, replay.headers['x-autofill'], replayed(replay)], [201, answer.body, 'partial', 'true'])
      t.equal(await linksOf(ws.name), 1)
    })

    t.test('bulk create: the whole answer replayed, nothing created again, no quota taken', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} bulk`, { hour: 3 })
      const body = {
        links: [{ url: page('b1'), id: 'b1' }, { url: 'ftp://nope' }, { url: page('b2') }, { url: page('b3') }],
        autofill: false,
      }
      const first = await post(app, ws.token, BULK, body, 'bulk-key')
      t.equal(first.statusCode, 200)
      t.same(first.json().results.map((result: { status: number }) => result.status), [201, 400, 201, 201])
      t.equal(quotaHeaders(first).remaining, '0')
      const again = await post(app, ws.token, BULK, body, 'bulk-key')
      t.same([again.statusCode, again.body, again.headers['content-type'], replayed(again)], [200, first.body, first.headers['content-type'], 'true'])
      t.equal(quotaHeaders(again).remaining, '0')
      t.equal(await linksOf(ws.name), 3)
    })

    t.test('bad keys: 400 naming the header, nothing created', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} bad keys`, {})
      const body = { link: { url: page(10) }, autofill: false }
      for (const key of ['""', 'k'.repeat(256), '"' + 'k'.repeat(256) + '"', '"open', '"a"b"', '"a";p=1', '"a\\nb"', 'tab\there', 'caf\u00e9']) {
        for (const url of [CREATE, BULK]) {
          const response = await post(app, ws.token, url, url === CREATE ? body : { links: [body.link] }, key)
          t.equal(response.statusCode, 400, `${JSON.stringify(key)} on ${url}`)
          t.match(response.json(), {
            code: 'validation_failed',
            errors: [{ path: '/headers/Idempotency-Key', message: /printable ASCII|quoted string/ }],
          })
        }
      }
      t.equal(await linksOf(ws.name), 0)
      // The longest key, and escapes: `"a\"b"` is the key a"b.
      const longest = 'k'.repeat(255)
      t.equal((await post(app, ws.token, CREATE, body, longest)).statusCode, 201, '255 characters')
      t.equal(replayed(await post(app, ws.token, CREATE, body, `"${longest}"`)), 'true', 'quoted, the same key')
      const escaped = await post(app, ws.token, CREATE, { link: { url: page(11) }, autofill: false }, '"a\\"b\\\\c"')
      t.equal(escaped.statusCode, 201)
      t.equal(replayed(await post(app, ws.token, CREATE, { link: { url: page(11) }, autofill: false }, 'a"b\\c')), 'true', 'the escapes undone')
    })

    t.test("the OpenAPI document's pattern takes exactly the keys the service takes", async (t) => {
      const documented = new RegExp((IdempotencyKeyHeaders.properties['Idempotency-Key'] as { pattern: string }).pattern, 'u')
      const keys = ['""', 'k'.repeat(256), '"' + 'k'.repeat(256) + '"', '"open', '"a"b"', '"a";p=1', '"a\\nb"', 'tab\there', 'caf\u00e9',
        'k'.repeat(255), '"' + 'k'.repeat(255) + '"', '"' + '\\"'.repeat(255) + '"', '"a\\"b\\\\c"', 'a"b\\c', 'x', '"x"']
      for (const key of keys) {
        let taken = true
        try {
          parseIdempotencyKey(key, ['Idempotency-Key', key])
        } catch {
          taken = false
        }
        t.equal(documented.test(key), taken, JSON.stringify(key))
      }
    })

    t.test('on the wire: the quoted form as clients send it, and the header sent twice (400)', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} wire`, {})
      await app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = app.server.address() as AddressInfo
      const body = JSON.stringify({ link: { url: page(12) }, autofill: false })
      const send = (keyLines: string) =>
        rawRequest(
          port,
          `POST ${CREATE} HTTP/1.1\r\nHost: localhost\r\nApi-Authorization: ${ws.token}\r\nContent-Type: application/json\r\n` +
            `${keyLines}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        )
      const twice = await send('Idempotency-Key: one\r\nIdempotency-Key: two\r\n')
      t.equal(twice.status, 400)
      t.match(JSON.parse(twice.body), { errors: [{ path: '/headers/Idempotency-Key', message: 'must be sent once' }] })
      t.equal(await linksOf(ws.name), 0)
      const first = await send('Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"\r\n')
      const again = await send('idempotency-key:   8e03978e-40d5-43e8-bc93-6894a57f9324  \r\n')
      t.same([first.status, again.status, again.body, again.headers['idempotent-replayed']], [201, 201, first.body, 'true'])
      t.equal(await linksOf(ws.name), 1)
    })

    t.test('a body the schema refuses is answered 400 and kept; a body that is not JSON holds no key', async (t) => {
      const ws = await quotaWorkspace(prisma, `${store} schema`, {})
      const first = await post(app, ws.token, CREATE, { link: { title: 5 } }, 'schema-key')
      t.equal(first.statusCode, 400)
      t.equal(replayed(await post(app, ws.token, CREATE, { link: { title: 5 } }, 'schema-key')), 'true')
      const broken = await post(app, ws.token, CREATE, '{"link":', 'broken-key')
      t.match([broken.statusCode, broken.json().code], [400, 'invalid_json'])
      t.equal((await post(app, ws.token, CREATE, { link: { url: page(13) }, autofill: false }, 'broken-key')).statusCode, 201, 'the key is still free')
    })
  })
}

t.test('database store: 24 h on the service clock, abandoned claims, the sweep', async (t) => {
  const { app } = setups[0]
  clock.set(T0)
  const ws = await quotaWorkspace(prisma, 'clock', {})
  const body = { link: { url: page('c') }, autofill: false }
  const first = await post(app, ws.token, CREATE, body, 'day-key')
  t.equal(first.statusCode, 201)
  const workspaceId = first.json().workspaceId as number

  clock.advance(ANSWER_TTL_MS / 1000 - 1)
  t.equal(replayed(await post(app, ws.token, CREATE, body, 'day-key')), 'true', 'replayed within 24 h')
  clock.advance(1)
  const after = await post(app, ws.token, CREATE, body, 'day-key')
  t.equal(after.statusCode, 201)
  t.equal(replayed(after), undefined, 'after 24 h the key is new again')
  t.not(after.json().uniq, first.json().uniq)
  t.equal(await linksOf(ws.name), 2)

  // A claim whose instance died (never answered) holds for its lease, then is taken over.
  await database.sql(
    `INSERT INTO "IdempotencyKey" ("workspaceId", "key", "fingerprint", "claimToken", "expiresAt") VALUES ($1, 'crashed', $2, 'gone', $3)`,
    [workspaceId, requestFingerprint('createLink', Buffer.from(JSON.stringify(body))), new Date(clock.ms + CLAIM_LEASE_MS)],
  )
  t.equal((await post(app, ws.token, CREATE, body, 'crashed')).statusCode, 409, 'in progress while the lease lasts')
  clock.advance(CLAIM_LEASE_MS / 1000)
  t.equal((await post(app, ws.token, CREATE, body, 'crashed')).statusCode, 201, 'taken over once it ended')

  // Expired keys are deleted by the sweep a claim starts at most every 10 minutes.
  t.ok((await keyRows(database, workspaceId)).some((row) => row.key === 'day-key'))
  clock.advance(ANSWER_TTL_MS / 1000 + SWEEP_INTERVAL_MS / 1000)
  t.equal((await post(app, ws.token, CREATE, { link: { url: page('d') }, autofill: false }, 'later')).statusCode, 201)
  t.ok(await waitFor(async () => (await keyRows(database, workspaceId)).map((row) => row.key).join() === 'later'), 'only the live key is left')
})

t.test('an instance that died between storing the link and keeping the answer: the retry answers that link, not a second one', async (t) => {
  const { app } = setups[0]
  clock.set(T0)
  const ws = await quotaWorkspace(prisma, 'crash-window', {})
  // The crash is played by deleting the key's record from the store once the link is stored: what a retry after
  // the lease finds when the instance died before keeping its answer.
  const forgetKeys = () => database.sql(`DELETE FROM "IdempotencyKey" WHERE "workspaceId" = (SELECT "id" FROM "Workspace" WHERE "name" = $1)`, [ws.name])
  const cases = [
    { key: 'plain-crash', body: { link: { url: page('crash-plain') }, autofill: false } },
    // A link with a pixel is stored in a transaction of several statements.
    { key: 'pixel-crash', body: { link: { url: page('crash-pixel'), pixels: [{ platform: 'ga', value: 'G-CRASH' }] }, autofill: false } },
  ]
  for (const { key, body } of cases) {
    const first = await post(app, ws.token, CREATE, body, key)
    t.equal(first.statusCode, 201, `${key}: created`)
    await forgetKeys()
    const retry = await post(app, ws.token, CREATE, body, key)
    t.equal(retry.statusCode, 201, `${key}: the retry answers 201`)
    t.equal(replayed(retry), 'true', `${key}: marked as a replay`)
    t.same(answerHeaders(retry), answerHeaders(first), `${key}: Content-Type, Location and X-Autofill as the first answer's`)
    t.same(retry.json(), first.json(), `${key}: the same link`)
    t.equal(quotaHeaders(retry).remaining, quotaHeaders(first).remaining, `${key}: the answer from the stored link takes no quota`)
    t.equal(replayed(await post(app, ws.token, CREATE, body, key)), 'true', `${key}: and that answer is kept for the next retry`)
    await forgetKeys()
    const other = await post(app, ws.token, CREATE, { ...body, link: { ...body.link, url: page('another') } }, key)
    t.equal(other.statusCode, 422, `${key}: another request with the key is refused`)
    t.equal(other.json().code, 'idempotency_key_reused')
    const again = await post(app, ws.token, CREATE, body, key)
    t.equal(replayed(again), 'true', `${key}: the first body's retry still gets its link`)
    t.equal(again.json().uniq, first.json().uniq)
  }
  t.equal(await linksOf(ws.name), 2, 'one link per key')
  // The key's 24 hours are on the keys' clock, as the store's are.
  await forgetKeys()
  clock.advance(ANSWER_TTL_MS / 1000)
  const later = await post(app, ws.token, CREATE, cases[0].body, cases[0].key)
  t.equal(later.statusCode, 201)
  t.equal(replayed(later), undefined, 'after 24 h the key makes a new link')
  t.equal(await linksOf(ws.name), 3)
})

t.test('a bulk create whose instance died before keeping its answer: the retry answers the links it stored and creates the others', async (t) => {
  const { app } = setups[0]
  clock.set(T0)
  const ws = await quotaWorkspace(prisma, 'bulk-crash', { hour: 100, day: 1000 })
  const forgetKeys = () => database.sql(`DELETE FROM "IdempotencyKey" WHERE "workspaceId" = (SELECT "id" FROM "Workspace" WHERE "name" = $1)`, [ws.name])
  const body = {
    links: [
      { url: page('bulk-a') },
      { url: page('bulk-b'), id: 'bulk-b' },
      // Stored in a transaction of its own, as a single create stores it.
      { url: page('bulk-c'), pixels: [{ platform: 'ga', value: 'G-BULK' }] },
      { url: 'not a url' },
    ],
    autofill: false,
  }
  const results = (response: { json(): any }) => response.json().results as { status: number; link?: { uniq: number }; problem?: { code: string } }[]
  const first = await post(app, ws.token, BULK, body, 'bulk-crash')
  t.equal(first.statusCode, 200)
  t.same(results(first).map((result) => result.status), [201, 201, 201, 400])
  const uniqs = results(first).map((result) => result.link?.uniq)

  // The whole batch stored, the answer never kept.
  await forgetKeys()
  const retry = await post(app, ws.token, BULK, body, 'bulk-crash')
  t.equal(retry.statusCode, 200)
  t.same(results(retry).map((result) => result.link?.uniq), uniqs, 'the same links, the bad one answered 400 again')
  t.equal(await linksOf(ws.name), 3, 'nothing created twice')
  t.equal(quotaHeaders(retry).remaining, quotaHeaders(first).remaining, 'no quota taken for the links answered again')

  // Only part of the batch stored (here: the first link gone, and its key row with it).
  await prisma.link.delete({ where: { uniq: uniqs[0] } })
  await forgetKeys()
  const partial = await post(app, ws.token, BULK, body, 'bulk-crash')
  t.same(results(partial).map((result) => result.status), [201, 201, 201, 400])
  t.not(results(partial)[0].link?.uniq, uniqs[0], 'the missing link is created')
  t.same(results(partial).slice(1, 3).map((result) => result.link?.uniq), uniqs.slice(1, 3), 'the stored ones answered')
  t.equal(await linksOf(ws.name), 3)
  t.equal(Number(quotaHeaders(partial).remaining), Number(quotaHeaders(retry).remaining) - 1, 'one create counted')

  // Another body with the key is refused, and the first body's retry still finds its links.
  await forgetKeys()
  const other = await post(app, ws.token, BULK, { ...body, links: body.links.slice(1) }, 'bulk-crash')
  t.equal(other.statusCode, 422)
  t.equal(other.json().code, 'idempotency_key_reused')
  const again = await post(app, ws.token, BULK, body, 'bulk-crash')
  t.same(results(again).slice(1, 3).map((result) => result.link?.uniq), uniqs.slice(1, 3))
  t.equal(await linksOf(ws.name), 3)

  // The key sent to the other operation once the key store has forgotten it: 422 both ways, nothing created.
  await forgetKeys()
  const asCreate = await post(app, ws.token, CREATE, { link: { url: page('bulk-b') }, autofill: false }, 'bulk-crash')
  t.equal(asCreate.statusCode, 422, "a bulk's key sent to create")
  t.equal(asCreate.json().code, 'idempotency_key_reused')
  const created = await post(app, ws.token, CREATE, { link: { url: page('single') }, autofill: false }, 'single-crash')
  t.equal(created.statusCode, 201)
  await forgetKeys()
  const asBulk = await post(app, ws.token, BULK, { links: [{ url: page('single') }], autofill: false }, 'single-crash')
  t.equal(asBulk.statusCode, 422, "a create's key sent to bulk")
  t.equal(asBulk.json().code, 'idempotency_key_reused')
  t.equal(await linksOf(ws.name), 4, 'only the single create made a link')
})

t.test('5xx is not kept: the retry runs again', async (t) => {
  // A quota store that fails while `down`: under RATE_LIMIT_ON_REDIS_ERROR=deny the create is 503.
  let down = true
  const memory = new MemoryQuotaStore()
  const flaky: QuotaStore = {
    reserve: (...args) => (down ? Promise.reject(new Error('store down')) : memory.reserve(...args)),
    peek: (...args) => (down ? Promise.reject(new Error('store down')) : memory.peek(...args)),
    refund: (taken) => memory.refund(taken),
    close: () => memory.close(),
  }
  const { app } = await buildTestApp(t, { database, env: { RATE_LIMIT_ON_REDIS_ERROR: 'deny' }, rateLimits: { store: flaky } })
  const ws = await quotaWorkspace(prisma, 'unavailable', {})
  const body = { link: { url: page('u') }, autofill: false }
  const failed = await post(app, ws.token, CREATE, body, 'after-503')
  t.equal(failed.statusCode, 503)
  t.equal(failed.headers['retry-after'], '2')
  down = false
  const created = await post(app, ws.token, CREATE, body, 'after-503')
  t.equal(created.statusCode, 201)
  t.equal(replayed(created), undefined)
  t.equal(await linksOf(ws.name), 1)
})

t.test('Redis store: answers expire with their TTL, a dead instance\'s claim with its lease', { skip: REDIS_URL ? false : 'REDIS_URL is unset' }, async (t) => {
  // Redis keeps its own time: a short answer lifetime stands in for 24 h (the lease stays long enough for a
  // request on a loaded machine), and a claim written with a short expiry for a dead instance's.
  const keyPrefix = redisKeyPrefix(t)
  const { app } = await buildTestApp(t, { database, env: { REDIS_URL: REDIS_URL! }, idempotency: { keyPrefix, answerTtlMs: 400 }, rateLimits: { keyPrefix } })
  const ws = await quotaWorkspace(prisma, 'redis expiry', {})
  const body = { link: { url: page('e') }, autofill: false }
  const first = await post(app, ws.token, CREATE, body, 'short')
  t.equal(first.statusCode, 201)
  const workspaceId = first.json().workspaceId as number
  const gone = async (key: string) => (await redisKey(REDIS_URL!, keyPrefix, workspaceId, key)).value === null
  t.ok(await waitFor(() => gone('short')), 'the answer expires')
  const after = await post(app, ws.token, CREATE, body, 'short')
  t.same([after.statusCode, replayed(after)], [201, undefined], 'then the key is new again')
  t.equal(await linksOf(ws.name), 2)

  // A claim left by an instance that died: 409 while its lease lasts, then the request runs.
  const redis = new Redis(REDIS_URL!)
  t.teardown(() => redis.disconnect())
  const fingerprint = requestFingerprint('createLink', Buffer.from(JSON.stringify(body)))
  await redis.set(`${keyPrefix}idem:{ws:${workspaceId}}:crashed`, JSON.stringify({ fingerprint, token: 'gone' }), 'PX', 3000)
  t.equal((await post(app, ws.token, CREATE, body, 'crashed')).statusCode, 409)
  t.ok(await waitFor(() => gone('crashed')))
  t.equal((await post(app, ws.token, CREATE, body, 'crashed')).statusCode, 201)
})
