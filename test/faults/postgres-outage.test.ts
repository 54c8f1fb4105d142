/**
 * Issue 14, item 4: PostgreSQL lost and restored during a burst of creates. A server process reaches its
 * database through a proxy the test controls; in the middle of the burst every connection is cut and new ones
 * are refused for 2 s. Every answer is a 201 or a clean 503 with Retry-After (no 500, no hang), every 201 is
 * stored, nothing answered 503 is stored, and the service recovers by itself.
 */
import { once } from 'node:events'
import type { LightMyRequestResponse } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import t, { type Test } from 'tap'
import { openDatabase } from '../../src/db/database.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { apiClient } from '../support/api-client.js'
import { errorLog } from '../support/error-log.js'
import { rawRequest, type RawResponse } from '../support/raw-http.js'
import { logLines, startServer } from '../support/server-process.js'
import { TcpProxy } from '../support/tcp-proxy.js'
import { buildTestApp, client, createWorkspaceToken, json, openTestDatabase } from '../support/test-app.js'
import { DESKTOP } from '../redirects/visit-support.js'
import { ask, countStatuses, createLink, type Answer } from './fault-support.js'
import { until, waitFor } from '../support/polling.js'
import { FakeClock } from '../rate-limits/quota-support.js'
import { CLAIM_LEASE_MS } from '../../src/idempotency/idempotency-store.js'
import { waitForLockWaiters } from '../support/row-lock.js'

const CONCURRENCY = 6
/** Creates answered before the outage begins. */
const BEFORE = 30
const OUTAGE_MS = 2000
/** How long the burst goes on once the database is back. */
const AFTER_MS = 1500

t.test('PostgreSQL cut and refused for 2 s during a burst of creates', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL (the embedded database has no connection to cut)' }, async (t) => {
  const { database, url } = await openTestDatabase(t)
  const token = await createWorkspaceToken(database.prisma, { workspace: 'outage', defaultDomain: 'go.outage.test' })
  // The burst runs for a time, not a count: a fast machine creates more than the default 1,000 an hour.
  await setLimits(database.prisma, { workspace: 'outage', hour: 1_000_000, day: 1_000_000 })
  const { proxy, url: proxiedUrl } = await TcpProxy.inFrontOf(url!)
  t.teardown(() => proxy.close())
  const server = await startServer({ DATABASE_URL: proxiedUrl })
  t.teardown(() => server.child.kill('SIGKILL'))

  // A link visited before the outage: the redirect cache keeps serving it while the database is away.
  const cached = await createLink(server.port, token, { id: 'cached', url: 'https://example.com/cached' })
  t.equal(cached.status, 201)
  const visitCached = () =>
    rawRequest(server.port, 'GET /cached HTTP/1.1\r\nHost: go.outage.test\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0\r\nConnection: close\r\n\r\n')
  t.equal((await visitCached()).status, 302, 'visited before the outage')
  let visitDuringOutage: RawResponse | undefined
  // A create sent in the middle of the outage. The burst's own creates may all be in flight when the cut comes
  // and, their INSERT sent, settle after the outage with a 201 (the lost-answer path): this one cannot.
  let createDuringOutage: Answer | undefined

  // Creates go on, CONCURRENCY at a time, before the outage (BEFORE of them), during it, and for a while after it.
  const answers: Answer[] = []
  let outage: Promise<void> | undefined
  let restoredAt = Infinity
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < restoredAt + AFTER_MS) {
        const i = answers.length
        answers.push(undefined as unknown as Answer)
        if (i === BEFORE) {
          outage = (async () => {
            proxy.refuse()
            await sleep(OUTAGE_MS / 2)
            ;[visitDuringOutage, createDuringOutage] = await Promise.all([
              visitCached(),
              createLink(server.port, token, { id: 'pg-during', url: 'https://example.com/pg/during' }),
            ])
            await sleep(OUTAGE_MS / 2)
            proxy.restore()
            restoredAt = Date.now()
          })()
        }
        answers[i] = await createLink(server.port, token, { id: `pg-${i}`, url: `https://example.com/pg/${i}` })
      }
    }),
  )
  await outage
  t.comment(`answers: ${JSON.stringify(countStatuses(answers))}; connections refused by the proxy: ${proxy.counts.refused}`)

  const created = new Set<string>()
  const refused = new Set<string>()
  answers.forEach((answer: Answer, i) => {
    const slug = `pg-${i}`
    if (answer.status === 201) {
      created.add(slug)
      t.equal(answer.body.id, slug, `${slug}: the link asked for`)
      return
    }
    refused.add(slug)
    t.equal(answer.status, 503, `${slug}: 201 or 503, nothing else (${answer.error ?? JSON.stringify(answer.body)})`)
    t.match(answer.headers.get('content-type'), /^application\/problem\+json/)
    t.match(answer.body, { status: 503, code: 'unavailable' }, `${slug}: unavailable`)
    t.equal(answer.headers.get('retry-after'), '2', `${slug}: Retry-After`)
  })
  t.equal(createDuringOutage?.status, 503, 'a create sent during the outage is refused')
  t.equal(createDuringOutage?.headers.get('retry-after'), '2', 'with Retry-After')
  refused.add('pg-during')
  t.ok(created.size > BEFORE, 'the others were served, before and after')

  t.equal(visitDuringOutage?.status, 302, 'a cached link is redirected while the database is away')

  // The service comes back by itself: /readyz, then creates.
  t.ok(await waitFor(async () => (await ask(server.port, '/readyz')).status === 200), '/readyz is 200 again without a restart')
  for (let i = 0; i < 5; i++) {
    const slug = `after-${i}`
    const answer = await createLink(server.port, token, { id: slug, url: `https://example.com/after/${i}` })
    t.equal(answer.status, 201, `${slug}: created after the outage`)
    created.add(slug)
  }

  // What is stored, read directly (not through the proxy): every 201, and no slug answered with an error.
  const stored = await database.prisma.link.findMany({ where: { slug: { not: 'cached' } }, select: { slug: true } })
  const storedSlugs = new Set(stored.map((link) => link.slug))
  t.same([...created].filter((slug) => !storedSlugs.has(slug)), [], 'every acknowledged create is stored')
  t.same([...refused].filter((slug) => storedSlugs.has(slug)), [], 'no create answered 503 is stored')
  t.equal(storedSlugs.size, created.size, 'and nothing else')

  const visits = async () =>
    (await database.prisma.$queryRawUnsafe<{ count: number }[]>(`SELECT count(*)::int AS "count" FROM "analytics"."Visit" WHERE "linkUniq" = $1`, cached.body.uniq))[0].count
  t.ok(await waitFor(async () => (await visits()) === 2), 'both visits are stored, the one of the outage once the database is back')

  t.same(logLines(server.output()).filter((line) => line.level >= 50), [], 'no error in the log: 503s are warnings')
})

/**
 * The app in this process on the file's scratch database reached through a proxy (and the same database
 * direct, to see what is stored); made once, for the tests below, which use slugs of their own.
 */
let shared: ReturnType<typeof proxiedApp> | undefined
async function proxiedApp() {
  const { database: direct, url } = await openTestDatabase(t)
  const token = await createWorkspaceToken(direct.prisma, { workspace: 'lost', defaultDomain: 'go.lost.test' })
  const { proxy, url: proxiedUrl } = await TcpProxy.inFrontOf(url!)
  const proxied = await openDatabase({ databaseUrl: proxiedUrl, dataDir: 'unused', migrate: false })
  t.teardown(async () => {
    await proxied.close()
    await proxy.close()
  })
  const log = errorLog()
  const { app } = await buildTestApp(t, { database: proxied, logger: log.logger })
  return { app, direct, proxied, url: url!, proxy, token, log }
}
const sharedApp = () => (shared ??= proxiedApp())

const insertSent = (proxy: TcpProxy) => proxy.holdRepliesTo('INSERT INTO "Link"')

/**
 * Another transaction, on a connection of its own to the database at `url`, holding `slug` on the domain of the
 * link `probeUniq` (uncommitted): an insert of that slug waits for it. Ended with the test.
 */
async function holdSlug(t: Test, url: string, probeUniq: number, slug: string): Promise<pg.Client> {
  const holder = new pg.Client({ connectionString: url })
  await holder.connect()
  t.teardown(() => holder.end())
  await holder.query('BEGIN')
  await holder.query(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt")
     SELECT "workspaceId", "domain", $2, $2, 'https://example.com/held', now() FROM "Link" WHERE "uniq" = $1`,
    [probeUniq, slug],
  )
  return holder
}

t.test('regression: a create whose INSERT was committed but whose answer was lost answers 201, stored once', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { app, direct, proxy, token, log } = await sharedApp()
  insertSent(proxy)
  const answer = client(app, token).create({ id: 'lost-answer', url: 'https://example.com/lost' }, { autofill: false })
  // PostgreSQL runs and commits the INSERT; its answer stops at the proxy.
  t.ok(await waitFor(async () => (await direct.prisma.link.count({ where: { slug: 'lost-answer' } })) === 1), 'committed')
  proxy.refuse()
  await sleep(500)
  proxy.restore()
  const response = await answer
  t.equal(response.statusCode, 201, response.body)
  const stored = await direct.prisma.link.findMany({ where: { slug: 'lost-answer' } })
  t.equal(stored.length, 1, 'stored once')
  t.equal(json(response).uniq, stored[0].uniq, 'and the answer is that link')
  t.same(log.errorLines(), [])
})

t.test('a keyed bulk create whose COMMIT went through but whose answer was lost: 503 that says to send it again with the key, which answers those links, stored once', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { direct, proxied, proxy, token } = await sharedApp()
  // An instance whose key store (the database, without REDIS_URL) runs on a clock of the test's.
  const clock = new FakeClock()
  const log = errorLog()
  const { app } = await buildTestApp(t, { database: proxied, logger: log.logger, idempotency: { now: clock.now } })
  const body = { links: [{ url: 'https://example.com/bulk-lost/1' }, { url: 'https://example.com/bulk-lost/2', id: 'bulk-lost-2' }], autofill: false }
  const send = () =>
    app.inject({
      method: 'POST',
      url: '/v1/links/bulk',
      headers: { 'api-authorization': token, 'content-type': 'application/json', 'idempotency-key': '"bulk-lost"' },
      payload: JSON.stringify(body),
    })
  const stored = () =>
    direct.prisma.link.findMany({ where: { url: { startsWith: 'https://example.com/bulk-lost/' } }, orderBy: { uniq: 'asc' } })
  // Links stored with their keys go in a transaction of their own (see the test below).
  proxy.holdRepliesTo('COMMIT')
  const answer = send()
  t.ok(await waitFor(async () => (await stored()).length === 2), 'committed')
  proxy.refuse()
  await sleep(500)
  proxy.restore()
  const response = await answer
  t.equal(response.statusCode, 503)
  t.equal(response.headers['retry-after'], '2')
  t.match(json(response), { code: 'unavailable', detail: /same Idempotency-Key/ })
  // The key's store is the database, which was away when the request failed: the key could not be given back, and
  // holds until its lease ends (with REDIS_URL it is given back at once). Then the retry runs.
  t.equal((await send()).statusCode, 409, 'the key is still held')
  clock.advance(CLAIM_LEASE_MS / 1000)
  const retry = await send()
  t.equal(retry.statusCode, 200, 'the retry runs')
  const links = await stored()
  t.equal(links.length, 2, 'stored once')
  t.same(json(retry).results.map((result: { link: { uniq: number } }) => result.link.uniq), links.map((link) => link.uniq), 'the retry answers them')
  t.same(log.errorLines(), [])
})

t.test('a keyed bulk create cut off while its statement runs stores nothing, even once the statement ends: its retry with the key stores each link once', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  // Review bulk: a statement alone commits when it ends, client or not. One that waited for a slug's lock while its
  // connection was cut committed after the request was answered 503 and after the key's retry had stored the links
  // again: a generated slug twice. With the keys, the links go in a transaction, which PostgreSQL rolls back.
  const { direct, proxied, proxy, token, url } = await sharedApp()
  const { app } = await buildTestApp(t, { database: proxied })
  const body = { links: [{ url: 'https://example.com/orphan/generated' }, { url: 'https://example.com/orphan/named', id: 'orphan-named' }], autofill: false }
  const send = (instance: typeof app) => client(instance, token).send('POST', '/v1/links/bulk', body, { 'idempotency-key': 'orphan' })
  const stored = () => direct.prisma.link.findMany({ where: { url: { startsWith: 'https://example.com/orphan/' } }, orderBy: { uniq: 'asc' } })
  // Another transaction holds the slug: the bulk's INSERT waits for it.
  const { app: other } = await buildTestApp(t, { database: direct })
  const probe = json(await client(other, token).create({ url: 'https://example.com/probe' }, { autofill: false }))
  const holder = await holdSlug(t, url, probe.uniq, 'orphan-named')
  const answer = send(app)
  await waitForLockWaiters(direct.prisma, 1)
  proxy.cut()
  const first = await answer
  t.equal(first.statusCode, 503, 'the connection was cut')
  // The retry (through the database directly: the proxied app's pool is still finding its feet) waits for the
  // slug too, beside the first attempt's statement, whose client is gone. The first attempt gives its key back once
  // its database answers again: until then the retry is answered 409 idempotency_key_in_use, and sent again after
  // a moment, as a client does (a CI run under load met that 409 and waited in vain for a second waiter).
  let retry = send(other)
  const lockWaiters = async () =>
    (await direct.prisma.$queryRaw<{ waiting: number }[]>`
      SELECT count(*)::int AS "waiting" FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)[0].waiting
  await until(async () => {
    const settled = await Promise.race([retry, sleep(20).then(() => null)])
    if (settled !== null) {
      t.equal(settled.statusCode, 409, 'a retry answered before the slug is free is told the key is in use')
      await sleep(100)
      retry = send(other)
      return false
    }
    return (await lockWaiters()) >= 2
  }, 'the retry waiting for the slug beside the first attempt', 20_000)
  await holder.query('ROLLBACK')
  const answered = await retry
  t.equal(answered.statusCode, 200, answered.body)
  t.same(json(answered).results.map((result: { status: number }) => result.status), [201, 201])
  await sleep(500)
  const links = await stored()
  t.same(links.map((link) => link.url), ['https://example.com/orphan/generated', 'https://example.com/orphan/named'], 'each link once: the first attempt stored nothing')
  t.same(json(answered).results.map((result: { link: { uniq: number } }) => result.link.uniq), links.map((link) => link.uniq), 'the retry answers them')
  proxy.restore()
})

t.test('a bulk create without a key cut off while its statement waits is answered 503 and stores nothing, even once the statement ends', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { direct, proxied, proxy, token, url } = await sharedApp()
  const { app } = await buildTestApp(t, { database: proxied })
  const probe = json(await client(app, token).create({ url: 'https://example.com/unkeyed-probe' }, { autofill: false }))
  const holder = await holdSlug(t, url, probe.uniq, 'unkeyed-held')
  const body = { links: [{ url: 'https://example.com/unkeyed-cut/generated' }, { url: 'https://example.com/unkeyed-cut/named', id: 'unkeyed-held' }], autofill: false }
  const answer = client(app, token).send('POST', '/v1/links/bulk', body)
  await waitForLockWaiters(direct.prisma, 1)
  proxy.cut()
  const response = await answer
  t.equal(response.statusCode, 503)
  await holder.query('ROLLBACK')
  await sleep(500)
  t.equal(await direct.prisma.link.count({ where: { url: { startsWith: 'https://example.com/unkeyed-cut/' } } }), 0, 'nothing stored: the statement ended without its client, and was rolled back')
  proxy.restore()
})

t.test('links whose outcome is unknown keep their places in the quota: the limit is not exceeded by them', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { app, direct, proxy } = await sharedApp()
  const token = await createWorkspaceToken(direct.prisma, { workspace: 'kept', defaultDomain: 'go.kept.test' })
  await setLimits(direct.prisma, { workspace: 'kept', hour: 3 })
  await app.ready()
  const links = [1, 2, 3].map((n) => ({ url: `https://example.com/kept/${n}` }))
  proxy.holdRepliesTo('COMMIT')
  const answer = client(app, token).send('POST', '/v1/links/bulk', { links, autofill: false }, { 'idempotency-key': 'kept' })
  t.ok(await waitFor(async () => (await direct.prisma.link.count({ where: { url: { startsWith: 'https://example.com/kept/' } } })) === 3), 'committed')
  proxy.refuse()
  await sleep(300)
  proxy.restore()
  t.equal((await answer).statusCode, 503)
  const next = await client(app, token).create({ url: 'https://example.com/kept/4' }, { autofill: false })
  t.equal(next.statusCode, 429, 'the three links that may be stored (they are) hold the hour\'s three places')
})

t.test('a write whose server process is terminated (pg_terminate_backend: a failover, a restart) is a 503 with Retry-After, never a 500', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { direct, token, url } = await sharedApp()
  const { app } = await buildTestApp(t, { database: direct })
  const probe = json(await client(app, token).create({ url: 'https://example.com/terminated-probe' }, { autofill: false }))
  const holder = await holdSlug(t, url, probe.uniq, 'terminated')
  // A bulk whose statement waits for the slug's lock; its server process is ended meanwhile (57P01).
  const answer = client(app, token).send('POST', '/v1/links/bulk', { links: [{ url: 'https://example.com/terminated', id: 'terminated' }], autofill: false })
  await waitForLockWaiters(direct.prisma, 1)
  await holder.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
  const response = await answer
  t.equal(response.statusCode, 503, response.body)
  t.equal(response.headers['retry-after'], '2')
  t.match(json(response), { code: 'unavailable' })
  await holder.query('ROLLBACK')
  t.equal(await direct.prisma.link.count({ where: { url: 'https://example.com/terminated' } }), 0, 'not stored')
})

t.test('a bulk create without a key whose COMMIT went through but whose answer was lost: 503 that says the links may be stored, not to try again', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { app, direct, proxy, token } = await sharedApp()
  const body = { links: [{ url: 'https://example.com/bulk-unkeyed/1' }], autofill: false }
  // A batch's links go in a transaction of their own, keyed or not.
  proxy.holdRepliesTo('COMMIT')
  const answer = client(app, token).send('POST', '/v1/links/bulk', body)
  t.ok(await waitFor(async () => (await direct.prisma.link.count({ where: { url: 'https://example.com/bulk-unkeyed/1' } })) === 1), 'committed')
  proxy.refuse()
  await sleep(300)
  proxy.restore()
  const response = await answer
  t.equal(response.statusCode, 503)
  t.match(json(response), { code: 'unavailable', detail: /could not learn which were: look them up before creating them again/ })
})

t.test('a create or bulk create of links with pixels whose COMMIT was answered but the answer lost: 503 that says they may be stored; a keyed retry answers them', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { app, direct, proxy, token } = await sharedApp()
  await app.ready()
  const pixel = (n: string) => ({ pixels: [{ platform: 'facebook', value: `COMMIT-${n}` }] })
  const stored = (prefix: string) => direct.prisma.link.findMany({ where: { url: { startsWith: prefix } }, orderBy: { uniq: 'asc' } })
  /** Sends `request` with the answer to its COMMIT held, once it is committed cuts the connections, and returns the answer. */
  const commitAnswerLost = async (request: () => Promise<LightMyRequestResponse>, prefix: string, count: number) => {
    proxy.holdRepliesTo('COMMIT')
    const answer = request()
    t.ok(await waitFor(async () => (await stored(prefix)).length === count), `${prefix}: committed`)
    proxy.refuse()
    await sleep(300)
    proxy.restore()
    return answer
  }

  const single = await commitAnswerLost(
    () => client(app, token).create({ url: 'https://example.com/commit-single', ...pixel('single') }, { autofill: false }),
    'https://example.com/commit-single', 1,
  )
  t.equal(single.statusCode, 503)
  t.match(json(single), { code: 'unavailable', detail: /could not learn whether it was: look it up/ })
  const keyedSingleBody = { link: { url: 'https://example.com/commit-single-keyed', ...pixel('single-keyed') }, autofill: false }
  const keyedSingle = () => client(app, token).send('POST', '/v1/links/create', keyedSingleBody, { 'idempotency-key': 'single-lost' })
  const firstSingle = await commitAnswerLost(keyedSingle, 'https://example.com/commit-single-keyed', 1)
  t.equal(firstSingle.statusCode, 503)
  t.match(json(firstSingle), { code: 'unavailable', detail: /could not learn whether it was: send the request again with the same Idempotency-Key/ })
  await direct.sql(`DELETE FROM "IdempotencyKey" WHERE "key" = 'single-lost'`)
  const retriedSingle = await keyedSingle()
  t.equal(retriedSingle.statusCode, 201, 'the retry answers the link')
  t.equal(json(retriedSingle).uniq, (await stored('https://example.com/commit-single-keyed'))[0].uniq)
  t.equal((await stored('https://example.com/commit-single-keyed')).length, 1, 'stored once')

  const batch = (prefix: string) => ({
    links: [{ url: `${prefix}/plain` }, { url: `${prefix}/pixel`, ...pixel(prefix.slice(-5)) }],
    autofill: false,
  })
  // The plain link's statement has a transaction too: its COMMIT's answer is the one lost, and the link with
  // pixels is never sent.
  const unkeyed = await commitAnswerLost(
    () => client(app, token).send('POST', '/v1/links/bulk', batch('https://example.com/commit-bulk')),
    'https://example.com/commit-bulk', 1,
  )
  t.equal(unkeyed.statusCode, 503)
  t.match(json(unkeyed), { code: 'unavailable', detail: /could not learn which were: look them up/ })

  const keyedBody = batch('https://example.com/commit-keyd')
  const keyed = () => client(app, token).send('POST', '/v1/links/bulk', keyedBody, { 'idempotency-key': 'commit-lost' })
  // With a key the plain link's statement has a transaction too: its COMMIT's answer is the one lost, and the link
  // with pixels is never sent.
  const first = await commitAnswerLost(keyed, 'https://example.com/commit-keyd', 1)
  t.equal(first.statusCode, 503)
  t.match(json(first), { code: 'unavailable', detail: /same Idempotency-Key/ })
  // The key store is the database here, which was away as the request failed: the key holds until its lease
  // ends, or the next retry after the key is free. Released by hand here, as the lease's end would.
  await direct.sql(`DELETE FROM "IdempotencyKey" WHERE "key" = 'commit-lost'`)
  const retry = await keyed()
  t.equal(retry.statusCode, 200, 'the retry runs')
  const links = await stored('https://example.com/commit-keyd')
  t.equal(links.length, 2, 'nothing stored twice')
  t.same(json(retry).results.map((result: { link: { uniq: number } }) => result.link.uniq), links.map((link) => link.uniq), 'the retry answers them')
})

t.test('regression: a lost create whose slug another took before it ran is 409, and it is not stored', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { app, direct, url, proxy, token } = await sharedApp()
  const [{ id: workspaceId }] = await direct.prisma.$queryRawUnsafe<{ id: number }[]>(`SELECT "id" FROM "Workspace" WHERE "name" = 'lost'`)
  // Another writer holds the slug, not yet committed: the service's INSERT waits for it on the unique key.
  const other = new pg.Client({ connectionString: url })
  await other.connect()
  t.teardown(() => other.end())
  await other.query('BEGIN')
  await other.query(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt") VALUES ($1, 'go.lost.test', 'contested', 'contested', 'https://example.com/other', now())`,
    [workspaceId],
  )
  insertSent(proxy)
  const answer = client(app, token).create({ id: 'contested', url: 'https://example.com/mine' }, { autofill: false })
  const waiting = async () =>
    (await direct.prisma.$queryRawUnsafe<unknown[]>(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).length === 1
  t.ok(await waitFor(waiting), 'the INSERT waits for the other writer')
  proxy.refuse()
  await other.query('COMMIT')
  await sleep(300)
  proxy.restore()
  const response = await answer
  t.equal(response.statusCode, 409, response.body)
  t.match(json(response), { code: 'slug_taken' })
  const stored = await direct.prisma.link.findMany({ where: { slug: 'contested' } })
  t.same(stored.map((link) => link.url), ['https://example.com/other'], 'only the other link is stored')
})

t.test('a create whose answer was lost, with the database out of reach for longer than the service waits: 503 that says the outcome is unknown', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { app, direct, proxy, token, log } = await sharedApp()
  insertSent(proxy)
  const answer = client(app, token).create({ id: 'unknown', url: 'https://example.com/unknown' }, { autofill: false })
  t.ok(await waitFor(async () => (await direct.prisma.link.count({ where: { slug: 'unknown' } })) === 1), 'committed')
  proxy.refuse()
  const response = await answer
  proxy.restore()
  t.equal(response.statusCode, 503)
  t.equal(response.headers['retry-after'], '2')
  t.match(json(response), { code: 'unavailable', detail: /could not learn whether it was/ })
  t.same(log.errorLines(), [], 'a warning, not an error')
})

t.test('an update or delete stored but answered 503 (its answer lost): visitors see the change at once all the same', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { app, direct, proxy, token } = await sharedApp()
  const api = client(app, token)
  const visitLost = (slug: string) => app.inject({ url: `/${slug}`, headers: { host: 'go.lost.test', 'user-agent': DESKTOP } })
  const cases = [
    { slug: 'stale-update', marker: 'UPDATE "Link"', write: (uniq: number) => api.update(uniq, { url: 'https://example.com/new' }, { autofill: false }),
      stored: async (slug: string) => (await direct.prisma.link.findFirst({ where: { slug } }))?.url === 'https://example.com/new',
      seen: (visit: { statusCode: number; headers: Record<string, unknown> }) => visit.statusCode === 302 && visit.headers.location === 'https://example.com/new' },
    { slug: 'stale-delete', marker: 'DELETE FROM "Link"', write: (uniq: number) => app.inject({ method: 'DELETE', url: `/v1/links/${uniq}`, headers: { 'api-authorization': token } }),
      stored: async (slug: string) => (await direct.prisma.link.count({ where: { slug } })) === 0,
      seen: (visit: { statusCode: number }) => visit.statusCode === 404 },
  ]
  for (const { slug, marker, write, stored, seen } of cases) {
    const created = await api.create({ id: slug, url: 'https://example.com/old' }, { autofill: false })
    t.equal(created.statusCode, 201)
    t.equal((await visitLost(slug)).headers.location, 'https://example.com/old', `${slug}: visited, so cached`)
    proxy.holdRepliesTo(marker)
    const answer = write(json(created).uniq)
    // PostgreSQL runs and commits the statement; its answer stops at the proxy, whose connections are then cut.
    t.ok(await waitFor(() => stored(slug)), `${slug}: stored`)
    proxy.refuse()
    const response = await answer
    proxy.restore()
    t.equal(response.statusCode, 503, `${slug}: the service could not learn the outcome`)
    t.ok(seen(await visitLost(slug)), `${slug}: the next visit sees the change, not the cached link`)
  }
})

t.test('a pixel or script change stored but answered 503 (its answer lost): visitors see it at once all the same', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { app, direct, proxy, token } = await sharedApp()
  const api = apiClient(app, token)
  const page = async (slug: string) => {
    const visit = await app.inject({ url: `/${slug}`, headers: { host: 'go.lost.test', 'user-agent': DESKTOP } })
    return visit.statusCode === 302 ? 'a plain redirect' : visit.body
  }
  const pixel = json(await api.post('/v1/pixels', { platform: 'facebook', value: '1111111111' }))
  const script = json(await api.post('/v1/scripts', { name: 'Lost', content: '<script>window.version = 1</script>' }))
  await api.link({ id: 'lost-pixel', url: 'https://example.com/p', pixels: [pixel.id] })
  await api.link({ id: 'lost-script', url: 'https://example.com/s', linkScripts: [script.id], linkScriptEnable: true })
  const pixelValue = async () => (await direct.prisma.pixel.findFirst({ where: { id: pixel.id } }))?.value
  const scriptContent = async () => (await direct.prisma.script.findFirst({ where: { id: Number(script.id) } }))?.content
  const cases = [
    // A pixel's change and both deletes are transactions (their COMMIT's answer is lost), a script's change one UPDATE.
    { slug: 'lost-pixel', marker: 'COMMIT', write: () => api.put(`/v1/pixels/${pixel.id}`, { value: '2222222222' }),
      stored: async () => (await pixelValue()) === '2222222222', before: /1111111111/, after: /2222222222/ },
    { slug: 'lost-script', marker: 'UPDATE "public"."Script"', write: () => api.put(`/v1/scripts/${script.id}`, { content: '<script>window.version = 2</script>' }),
      stored: async () => (await scriptContent()) === '<script>window.version = 2</script>', before: /window\.version = 1/, after: /window\.version = 2/ },
    { slug: 'lost-pixel', marker: 'COMMIT', write: () => api.delete(`/v1/pixels/${pixel.id}`),
      stored: async () => (await pixelValue()) === undefined, before: /2222222222/, after: /^a plain redirect$/ },
    { slug: 'lost-script', marker: 'COMMIT', write: () => api.delete(`/v1/scripts/${script.id}`),
      stored: async () => (await scriptContent()) === undefined, before: /window\.version = 2/, after: /^a plain redirect$/ },
  ]
  for (const [i, { slug, marker, write, stored, before, after }] of cases.entries()) {
    t.match(await page(slug), before, `${i}: ${slug} visited as it was, so cached`)
    // The write reaches PostgreSQL and commits; its answer stops at the proxy, whose connections are then cut.
    proxy.holdRepliesTo(marker)
    const answer = write()
    t.ok(await waitFor(stored), `${i}: stored`)
    proxy.refuse()
    const response = await answer
    proxy.restore()
    t.equal(response.statusCode, 503, `${i}: the service could not learn the outcome`)
    t.match(await page(slug), after, `${i}: the next visit shows the change, not the cached page`)
  }
})

t.test('regression: a connection cut during a transaction (a batch of visits) fails the transaction, not the process', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { proxied, proxy } = await sharedApp()
  proxy.holdRepliesTo('pg_sleep')
  const transaction = proxied.transaction((query) => query('SELECT pg_sleep(0.05)'))
  await sleep(300)
  proxy.cut()
  await t.rejects(transaction, /Connection terminated/, 'the transaction fails (before the fix, the process died of an uncaught error event)')
  proxy.restore()
  t.same(await proxied.transaction((query) => query('SELECT 1 AS one')), [{ one: 1 }], 'and the next one works')

  // A connection idle in the pool when the cut comes: a transaction begun at once gets it (the pool has not read
  // its close yet), and its BEGIN fails; nothing ran, so it begins again on another connection.
  await Promise.all([1, 2, 3].map(() => proxied.transaction((query) => query('SELECT 1'))))
  proxy.cut()
  t.same(await proxied.transaction((query) => query('SELECT 2 AS two')), [{ two: 2 }], 'a transaction begun right after a cut runs')
})

t.test('a database that stops answering on open connections: 503s within the statement timeouts, not a hang', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  // Connections stay open and nothing comes back (a frozen server, a path that drops packets): no error ever
  // arrives from the network, so only the service's own deadlines end the wait.
  const { database: direct, url } = await openTestDatabase(t)
  const token = await createWorkspaceToken(direct.prisma, { workspace: 'silent', defaultDomain: 'go.silent.test' })
  const { proxy, url: proxiedUrl } = await TcpProxy.inFrontOf(url!)
  // A shorter deadline than the service's own (30 s), for the test's sake; the rules are the same.
  const deadline = 2000
  const proxied = await openDatabase({ databaseUrl: proxiedUrl, dataDir: 'unused', migrate: false, statementTimeoutMs: deadline })
  t.teardown(async () => {
    await proxied.close()
    await proxy.close()
  })
  const { app } = await buildTestApp(t, { database: proxied, logger: errorLog().logger })
  await app.redirects.domains.refresh()
  const api = client(app, token)
  const link = json(await api.create({ url: 'https://example.com/silent', id: 'silent' }, { autofill: false }))
  const timed = async (request: Promise<{ statusCode: number; headers: Record<string, unknown> }>) => {
    const started = Date.now()
    const response = await request
    return { status: response.statusCode, retryAfter: response.headers['retry-after'], ms: Date.now() - started }
  }

  proxy.holdReplies()
  const [ready, read, visitor, withPixels] = await Promise.all([
    timed(app.inject({ url: '/readyz' })),
    timed(app.inject({ url: `/v1/links/${link.uniq}`, headers: { 'api-authorization': token } })),
    timed(app.inject({ url: '/silent', headers: { host: 'go.silent.test' } })),
    // Prisma's own transaction (a link's pixels): its connection must not go back to the pool either.
    timed(api.update(link.uniq, { pixels: [{ platform: 'facebook', value: '1' }] }, { autofill: false })),
  ])
  t.equal(ready.status, 503, '/readyz')
  t.ok(ready.ms < 5000, `/readyz answered in ${ready.ms} ms`)
  t.match(read, { status: 503, retryAfter: /^\d+$/ }, 'an API read')
  t.ok(read.ms < deadline + 3000, `the API read answered in ${read.ms} ms`)
  t.equal(visitor.status, 503, 'a visit of a link not in the cache')
  t.ok(visitor.ms < 5000, `the visit answered in ${visitor.ms} ms`)
  t.equal(withPixels.status, 503, 'an update in a Prisma transaction')

  proxy.restore()
  // The silent connections were closed, not given back: nothing queues behind a statement that never ends.
  // As many reads as the pool has connections: each gets one, a silent one too had it been given back.
  const after = await Promise.all(
    Array.from({ length: 10 }, () => timed(app.inject({ url: `/v1/links/${link.uniq}`, headers: { 'api-authorization': token } }))),
  )
  t.same(after.map((answer) => answer.status), Array(10).fill(200), 'the first reads once the database answers again')
  const slowest = Math.max(...after.map((answer) => answer.ms))
  t.ok(slowest < deadline, `at once (the slowest in ${slowest} ms)`)
  t.equal((await api.update(link.uniq, { title: 'back' }, { autofill: false })).statusCode, 200)

  // One statement of Prisma's transaction never answered, on a connection that stays silent for good: Prisma
  // gives its connections back without an error, so the pool would hand it out again, to wait behind it.
  proxy.holdRepliesTo('FOR NO KEY UPDATE')
  t.equal((await api.update(link.uniq, { pixels: [{ platform: 'facebook', value: '2' }] }, { autofill: false })).statusCode, 503)
  proxy.restore()
  const later = await Promise.all(
    Array.from({ length: 10 }, () => timed(app.inject({ url: `/v1/links/${link.uniq}`, headers: { 'api-authorization': token } }))),
  )
  t.same(later.map((answer) => answer.status), Array(10).fill(200), 'every read answered')
  const slowestLater = Math.max(...later.map((answer) => answer.ms))
  t.ok(slowestLater < deadline, `none waited behind the silent connection (the slowest in ${slowestLater} ms)`)
})

t.test(
  'SIGTERM while PostgreSQL stopped answering: the requests in flight are answered 503, the visits are logged as lost, and the process exits 0 in time',
  { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' },
  async (t) => {
    const { database, url } = await openTestDatabase(t)
    const token = await createWorkspaceToken(database.prisma, { workspace: 'frozen', defaultDomain: 'go.frozen.test' })
    const { proxy, url: proxiedUrl } = await TcpProxy.inFrontOf(url!)
    t.teardown(() => proxy.close())
    const server = await startServer({ DATABASE_URL: proxiedUrl })
    t.teardown(() => server.child.kill('SIGKILL'))
    const link = await createLink(server.port, token, { id: 'frozen', url: 'https://example.com/frozen' })
    t.equal(link.status, 201)
    const visit = () =>
      rawRequest(server.port, `GET /frozen HTTP/1.1\r\nHost: go.frozen.test\r\nUser-Agent: ${DESKTOP}\r\nConnection: close\r\n\r\n`)
    t.equal((await visit()).status, 302, 'the link is in the redirect cache')
    const storedVisits = async () =>
      (await database.prisma.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS "n" FROM "analytics"."Visit"`))[0].n
    t.ok(await waitFor(async () => (await storedVisits()) === 1), 'that visit is written')

    proxy.holdReplies()
    // Visits answered from the cache, buffered for a database that no longer answers.
    for (let i = 0; i < 3; i++) t.equal((await visit()).status, 302)
    const headers = { 'api-authorization': token, 'content-type': 'application/json' }
    const update = ask(server.port, `/v1/links/${link.body.uniq}`, { method: 'PUT', headers, body: JSON.stringify({ link: { title: 'late' }, autofill: false }) })
    await sleep(300)
    const signalled = Date.now()
    server.child.kill('SIGTERM')
    const [exitCode] = await once(server.child, 'exit')
    const ms = Date.now() - signalled
    t.equal(exitCode, 0, 'a clean exit, not the kill after 10 s')
    t.ok(ms < 10_000, `within the close's time (${ms} ms)`)
    t.notMatch(server.output(), /killed by timeout/)
    const answer = await update
    t.equal(answer.error, undefined, 'the update in flight got an answer, not a reset connection')
    t.match(answer, { status: 503, body: { code: 'unavailable' } })
    t.match(answer.headers.get('retry-after'), /^\d+$/)
    t.ok(logLines(server.output()).some((line) => line.lost === 3), 'the three buffered visits are logged as lost')
  },
)

t.test("an app's close does not interrupt the database work of another app on the same database", { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { database } = await openTestDatabase(t)
  const drain = { idleGraceMs: 50, limitMs: 100, busyLimitMs: 300 }
  const closing = await buildTestApp(t, { database, drain })
  const staying = await buildTestApp(t, { database, drain })
  await Promise.all([closing.app.ready(), staying.app.ready()])
  await closing.app.close()
  // Past the closed app's busy limit, a statement of the other app is still under way.
  const slow = staying.database.sql<{ done: number }>('SELECT 1 AS "done" FROM pg_sleep(0.6)')
  await sleep(drain.busyLimitMs + 200)
  t.same(await slow, [{ done: 1 }], 'it completes')
})

t.test('a create whose INSERT is held at the close is answered 503 (outcome unknown) before its connection is cut, not sent again', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { database, url } = await openTestDatabase(t)
  const drain = { idleGraceMs: 50, limitMs: 300, busyLimitMs: 800 }
  const { app, prisma } = await buildTestApp(t, { database, drain })
  const token = await createWorkspaceToken(prisma, { workspace: 'held-at-close', defaultDomain: 'go.held-at-close.test' })
  const headers = { 'api-authorization': token, 'content-type': 'application/json' }
  const folder = await app.inject({ method: 'POST', url: '/v1/folders', headers, payload: JSON.stringify({ name: 'held' }) })
  const { id } = folder.json() as { id: number }
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  // The INSERT waits for the folder's row, held by a connection of the test's own (the close ends the app's).
  const holder = new pg.Client({ connectionString: url })
  await holder.connect()
  t.teardown(() => holder.end())
  await holder.query('BEGIN')
  await holder.query('SELECT 1 FROM "Folder" WHERE "id" = $1 FOR UPDATE', [id])
  const answer = fetch(`http://127.0.0.1:${port}/v1/links/create`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ autofill: false, link: { url: 'https://example.com/held', id: 'held-at-close', folderId: id } }),
  })
  await waitForLockWaiters(prisma, 1)
  const closed = app.close()
  const response = await answer
  t.equal(response.status, 503)
  t.match(await response.json(), { code: 'unavailable', detail: /could not learn whether/ })
  await holder.query('COMMIT')
  await closed
  await sleep(200)
  const waiting = await prisma.$queryRaw<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'INSERT INTO "Link"%'`
  t.equal(waiting[0].n, 0, 'no INSERT sent again after the close')
})
