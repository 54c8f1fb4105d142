/** POST /v1/links/bulk: one result per link in order, per-link problems, the create quota per link. */
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import { passwordHashes } from '../../src/links/password.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import pg from 'pg'
import { buildTestApp, createWorkspaceToken, json, openTestDatabase } from '../support/test-app.js'
import { answerWhenReleased, page, startPageServer, status } from '../autofill/page-server.js'
import { waitFor } from '../support/polling.js'

const { app, prisma, database } = await buildTestApp(t)

// The same app with its quotas in Redis: a batch's slots are taken in one atomic call there.
const { app: redisApp } = await buildTestApp(t, {
  database,
  env: { REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
  rateLimits: { keyPrefix: `test-${randomBytes(4).toString('hex')}:` },
})

const bulk = (token: string, body: unknown, target = app) =>
  target.inject({
    method: 'POST',
    url: '/v1/links/bulk',
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  })

t.test('each link is created under the create rules, its result in its place; one bad link fails no other', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'bulk1', defaultDomain: 'go.bulk1.test' })
  const response = await bulk(token, {
    autofill: false,
    links: [
      { url: 'https://example.com/a', id: 'first', tags: 'x, y' },
      { url: 'javascript:alert(1)', title: 5 },
      { url: 'https://example.com/c', id: 'first' },
      { url: 'https://example.com/d', pixels: [{ platform: 'facebook', value: '42' }] },
      { url: 'https://example.com/e', domain: 'elsewhere.test' },
      'not a link',
      { url: 'https://go.bulk1.test/loop' },
      { url: 'https://example.com/h' },
    ],
  })
  t.equal(response.statusCode, 200)
  t.ok(response.headers['ratelimit-policy'], 'the quota headers, as on a create')
  const { results } = json(response)
  t.equal(results.length, 8)
  t.match(results[0], { status: 201, link: { id: 'first', domain: 'go.bulk1.test', tags: ['x', 'y'], url: 'https://example.com/a' } })
  t.match(results[1], { status: 400, problem: { code: 'validation_failed', status: 400 } })
  const paths = results[1].problem.errors.map((error: { path: string }) => error.path).sort()
  t.same(paths, ['/links/1/title', '/links/1/url'], 'field errors named by the link\'s place')
  t.match(results[1].problem.detail, /^links\/1\//)
  t.match(results[2], { status: 409, problem: { code: 'slug_taken' } }, 'a slug taken by an earlier link of the batch')
  t.match(results[3], { status: 201, link: { pixels: [{ platform: 'facebook', value: '42' }] } })
  t.match(results[4], { status: 403, problem: { code: 'domain_not_allowed' } })
  t.match(results[5], { status: 400, problem: { errors: [{ path: '/links/5' }] } })
  t.match(results[6], { status: 400, problem: { code: 'redirect_loop', errors: [{ path: '/links/6/url' }] } })
  t.match(results[7], { status: 201, link: { domain: 'go.bulk1.test', id: /^[a-z0-9]{7}$/ } })
  const created = [results[0], results[3], results[7]].map((result) => result.link.uniq)
  // Links without pixels or scripts are stored together, in the order given; the others one by one after them.
  t.ok(created[0] < created[2], 'plain links stored in the order given')

  const stored = await prisma.link.findMany({ where: { workspace: { name: 'bulk1' } }, orderBy: { uniq: 'asc' } })
  t.same(stored.map((link) => link.url).sort(), ['https://example.com/a', 'https://example.com/d', 'https://example.com/h'])
  const read = await app.inject({ method: 'GET', url: `/v1/links/${created[0]}`, headers: { 'api-authorization': token } })
  t.same(json(read), { ...results[0].link }, 'the record answered is the one stored')
})

t.test('a slug the batch repeats (in any case) goes to its first link; the repeats are 409 and take no slot', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'bulkdup', defaultDomain: 'go.bulkdup.test' })
  await setLimits(prisma, { workspace: 'bulkdup', hour: 3 })
  const response = await bulk(token, {
    autofill: false,
    links: [
      // The first has a pixel: it is stored after the plain links, and must still win.
      { url: 'https://example.com/first', id: 'twice', pixels: [{ platform: 'ga', value: 'G-DUP' }] },
      { url: 'https://example.com/second', id: 'TWICE' },
      { url: 'https://example.com/c', id: 'c' },
      { url: 'https://example.com/d', id: 'd' },
    ],
  })
  t.equal(response.statusCode, 200)
  const results = json(response).results
  t.same(results.map((result: { status: number }) => result.status), [201, 409, 201, 201], 'three slots, three links: the repeat took none')
  t.match(results[1].problem, { code: 'slug_taken', status: 409 })
  t.match(results[1].problem.detail, 'go.bulkdup.test/TWICE is already taken', 'as a single create of it would be answered')
  const stored = await prisma.link.findMany({ where: { workspace: { name: 'bulkdup' } }, include: { pixels: true }, orderBy: { uniq: 'asc' } })
  t.same(stored.map((link) => [link.slug, link.url, link.pixels.length]), [
    ['c', 'https://example.com/c', 0],
    ['d', 'https://example.com/d', 0],
    ['twice', 'https://example.com/first', 1],
  ])
  t.equal(response.headers['x-ratelimit-remaining'], '0')
})

t.test('batches asking for the same slugs in different orders at once: one link per slug, uniqs in each batch\'s order', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'bulkorder', defaultDomain: 'go.bulkorder.test' })
  await setLimits(prisma, { workspace: 'bulkorder', hour: 100_000, day: 100_000 })
  const slugs = Array.from({ length: 60 }, (_, i) => `s${i}`)
  let seed = 7
  const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647)
  const shuffled = () => slugs.map((slug) => ({ slug, at: random() })).sort((a, b) => a.at - b.at).map(({ slug }) => (random() < 0.3 ? slug.toUpperCase() : slug))
  for (let round = 0; round < 4; round++) {
    const batches = Array.from({ length: 6 }, () => shuffled().map((slug) => ({ url: `https://example.com/${round}/${slug}`, id: `r${round}-${slug}` })))
    const responses = await Promise.all(batches.map((links) => bulk(token, { autofill: false, links })))
    t.same(responses.map((response) => response.statusCode), batches.map(() => 200), `round ${round}: every batch answered`)
    const created = responses.flatMap((response) => json(response).results.filter((result: { status: number }) => result.status === 201))
    t.equal(created.length, slugs.length, `round ${round}: one link per slug`)
    for (const response of responses) {
      const uniqs = json(response).results.filter((result: { status: number }) => result.status === 201).map((result: { link: { uniq: number } }) => result.link.uniq)
      t.same(uniqs, [...uniqs].sort((a, b) => a - b), "a batch's uniqs in its order")
    }
  }
  t.equal(await prisma.link.count({ where: { workspace: { name: 'bulkorder' } } }), 4 * slugs.length)
})

t.test('a batch takes its slugs in one order whatever order it lists them in: no deadlock with a writer that does too', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL (one connection at a time on the embedded database)' }, async (t) => {
  const { database: own, url } = await openTestDatabase(t)
  const { app: target } = await buildTestApp(t, { database: own })
  const token = await createWorkspaceToken(own.prisma, { workspace: 'bulklock', defaultDomain: 'go.bulklock.test' })
  const { id: workspaceId } = await own.prisma.workspace.findUniqueOrThrow({ where: { name: 'bulklock' } })
  const other = new pg.Client({ connectionString: url })
  await other.connect()
  t.teardown(() => other.end())
  const insert = (slug: string) =>
    other.query(`INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt") VALUES ($1, 'go.bulklock.test', $2, $2, 'https://example.com/other', now())`, [workspaceId, slug])
  // Another writer, in the same order (a before b), holds a and is about to take b.
  await other.query('BEGIN')
  await insert('a')
  const answer = bulk(token, { autofill: false, links: [{ url: 'https://example.com/b', id: 'b' }, { url: 'https://example.com/a', id: 'a' }] }, target)
  const blocked = await waitFor(async () => {
    // (Read afresh: within a transaction, pg_stat_activity is a snapshot kept until it ends.)
    await other.query('SELECT pg_stat_clear_snapshot()')
    const { rows } = await other.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
    return rows[0].n > 0
  }, 5000)
  t.ok(blocked, 'the batch waits for a')
  // Listed b first, the batch took b before waiting for a: the other writer would now wait for it in turn (a deadlock,
  // broken by PostgreSQL after a second). Taken in one order, it holds nothing yet, and b is free.
  await other.query("SET LOCAL lock_timeout = '300ms'")
  await t.resolves(insert('b'), 'the other writer takes b without waiting')
  await other.query('COMMIT')
  const results = json(await answer).results
  t.same(results.map((result: { status: number }) => result.status), [409, 409], 'both slugs were taken first by the other writer')
})

t.test('a NUL, a lone surrogate or a __proto__ key in one link fails that link alone; outside the links, the request', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'bulk-data', defaultDomain: 'go.bulk-data.test' })
  const send = (body: string) =>
    app.inject({ method: 'POST', url: '/v1/links/bulk', headers: { 'api-authorization': token, 'content-type': 'application/json' }, payload: body })
  const response = await send(
    '{"autofill":false,"links":[{"url":"https://example.com/","id":"kept"},{"url":"https://example.com/","title":"a\\u0000b"},' +
      '{"url":"https://example.com/","__proto__":{}},{"url":"https://example.com/","note":"\\ud800"},{"url":"https://example.com/","id":"kept-too"}]}',
  )
  t.equal(response.statusCode, 200)
  const { results } = json(response)
  t.same(results.map((result: { status: number }) => result.status), [201, 400, 400, 400, 201])
  t.same(results[1].problem.errors, [{ path: '/links/1/title', message: 'must not contain NUL characters' }])
  t.match(results[2].problem.errors, [{ path: '/links/2/__proto__', message: /prototype pollution/ }])
  t.match(results[3].problem.errors, [{ path: '/links/3/note', message: /lone surrogate/ }])
  t.same((await prisma.link.findMany({ where: { workspace: { name: 'bulk-data' } }, orderBy: { uniq: 'asc' } })).map((link) => link.slug), ['kept', 'kept-too'])

  const envelope = await send('{"autofill":false,"__proto__":{},"links":[{"url":"https://example.com/","id":"not-kept"}]}')
  t.equal(envelope.statusCode, 400, 'a bad key beside the links fails the request')
  t.match(json(envelope).errors, [{ path: '/__proto__' }])
  t.equal(await prisma.link.count({ where: { workspace: { name: 'bulk-data' }, slug: 'not-kept' } }), 0)
})

t.test('the body must hold 1 to 100 links', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'bulk2' })
  for (const body of [{ links: [] }, { links: Array.from({ length: 101 }, () => ({ url: 'https://example.com/' })) }, { link: {} }]) {
    const response = await bulk(token, body)
    t.equal(response.statusCode, 400)
    t.match(json(response), { code: 'validation_failed' })
  }
  t.equal(await prisma.link.count({ where: { workspace: { name: 'bulk2' } } }), 0)
})

for (const [store, target] of [['memory', app], ['redis', redisApp]] as const) {
t.test(`each created link counts against the create quota; what does not fit is rate_limited (${store} store)`, async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: `bulk3${store}`, defaultDomain: `go.bulk3${store}.test` })
  await setLimits(prisma, { workspace: `bulk3${store}`, hour: 4 })
  const first = await bulk(token, { autofill: false, links: [{ url: 'https://example.com/1', id: 'taken' }] }, target)
  t.equal(json(first).results[0].status, 201)
  const response = await bulk(token, {
    autofill: false,
    links: [
      { url: 'https://example.com/2' },
      { url: 'https://example.com/3', id: 'taken' },
      { url: 'nope' },
      { url: 'https://example.com/4' },
      { url: 'https://example.com/5' },
      { url: 'https://example.com/6' },
    ],
  }, target)
  t.equal(response.statusCode, 200)
  const statuses = json(response).results.map((result: { status: number }) => result.status)
  // 1's slug is taken (409, no slot) and 2 is invalid: 3 slots left for the 4 others, which 0, 3 and 4 get (in
  // order); 5 is refused.
  t.same(statuses, [201, 409, 400, 201, 201, 429])
  t.match(json(response).results[5].problem, { code: 'rate_limited', status: 429 })
  t.equal(await prisma.link.count({ where: { workspace: { name: `bulk3${store}` } } }), 4)
  t.match(response.headers['x-ratelimit-remaining'], '0')
  const last = await bulk(token, { autofill: false, links: [{ url: 'https://example.com/7' }, { url: 'https://example.com/1', id: 'TAKEN' }] }, target)
  t.same(json(last).results.map((result: { status: number }) => result.status), [429, 409], 'a full quota does not hide a slug taken')
  t.equal(await prisma.link.count({ where: { workspace: { name: `bulk3${store}` } } }), 4, 'never more than the quota')
})
}

t.test('links of one batch with and without passwords each keep their own (the first link decides no column)', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'bulkmix', defaultDomain: 'go.bulkmix.test' })
  const response = await bulk(token, {
    autofill: false,
    links: [
      { url: 'https://example.com/open', id: 'mix-disabled', passwordProtect: { enable: false } },
      { url: 'https://example.com/secret', id: 'mix-secret', passwordProtect: { enable: true, password: 'top secret' } },
      { url: 'https://example.com/plain', id: 'mix-plain' },
    ],
  })
  t.same(json(response).results.map((r: { status: number }) => r.status), [201, 201, 201])
  const stored = await prisma.link.findMany({ where: { slug: { startsWith: 'mix-' } }, orderBy: { uniq: 'asc' } })
  t.same(stored.map((link) => [link.slug, link.passwordEnable]), [['mix-disabled', false], ['mix-secret', true], ['mix-plain', null]])
  t.equal(stored[0].passwordHash, null)
  t.match(stored[1].passwordHash, /^scrypt\$/, 'the protected link has its hash: visitors get the form')
})

t.test('a new password is hashed only for a link that is stored: refused creates and batches cost no scrypt', async (t) => {
  // scrypt is slow on purpose (tens of ms and 32 MiB on one of libuv's four threads, which visitors' password
  // checks share), and a refused request counts against no quota: it must not buy any.
  const token = await createWorkspaceToken(prisma, { workspace: 'bulkpw', defaultDomain: 'go.bulkpw.test' })
  await setLimits(prisma, { workspace: 'bulkpw', hour: 1 }) // the one link stored below fills it
  const secret = { passwordProtect: { enable: true, password: 'a long secret' } }
  const send = (links: Record<string, unknown>[]) => bulk(token, { autofill: false, links })
  const create = (link: Record<string, unknown>) =>
    app.inject({
      method: 'POST', url: '/v1/links/create',
      headers: { 'api-authorization': token, 'content-type': 'application/json' },
      payload: JSON.stringify({ autofill: false, link }),
    })
  const hashed = async (work: () => Promise<unknown>) => {
    const before = passwordHashes.count
    await work()
    return passwordHashes.count - before
  }

  const foreign = Array.from({ length: 100 }, (_, i) => ({ url: `https://example.com/${i}`, domain: 'nope.test', ...secret }))
  t.equal(await hashed(async () => t.same(json(await send(foreign)).results.map((r: { status: number }) => r.status), foreign.map(() => 403))), 0, 'a domain not allowed')
  t.equal(await hashed(async () => t.equal(json(await send([{ url: 'https://example.com/', id: 'v1', ...secret }])).results[0].status, 400)), 0, 'a reserved slug')
  t.equal(await hashed(async () => t.equal((await create({ url: 'https://example.com/', domain: 'nope.test', ...secret })).statusCode, 403)), 0, 'a single create')

  t.equal(await hashed(async () => t.equal(json(await send([{ url: 'https://example.com/ok', ...secret }])).results[0].status, 201)), 1, 'a stored link: one hash')
  t.equal(await hashed(async () => t.same(json(await send([{ url: 'https://example.com/a', ...secret }])).results[0].status, 429)), 0, 'over the quota: a batch')
  t.equal(await hashed(async () => t.equal((await create({ url: 'https://example.com/b', ...secret })).statusCode, 429)), 0, 'over the quota: a create')
})

t.test('once the instance is closing, a batch fetches no more pages: the rest are stored as sent, and it is answered', async (t) => {
  const pages = await startPageServer(t)
  const filled = answerWhenReleased(t, page('<!doctype html><title>Filled</title>'))
  pages.route('/closing', filled.handler)
  const { app: closing } = await buildTestApp(t, { database, env: { AUTOFILL_ALLOW_PRIVATE: 'true', AUTOFILL_TIMEOUT_MS: '20000' } })
  const token = await createWorkspaceToken(prisma, { workspace: 'bulk-closing', defaultDomain: 'go.bulk-closing.test' })
  // Sixteen pages, fetched eight at a time: the second eight would start once the first have answered.
  const links = Array.from({ length: 16 }, (_, i) => ({ url: pages.url(`/closing?page=${i}`), id: `closing-${i}` }))
  // Over HTTP: the close waits for the requests of open connections (app.inject has none).
  await closing.listen({ port: 0, host: '127.0.0.1' })
  const { port } = closing.server.address() as AddressInfo
  const answer = fetch(`http://127.0.0.1:${port}/v1/links/bulk`, {
    method: 'POST',
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
    body: JSON.stringify({ autofill: true, links }),
  })
  t.ok(await waitFor(() => pages.requests('/closing').length === 8, 5000), 'the first eight pages are being fetched')
  const closed = closing.close()
  await waitFor(() => closing.closingSince !== null, 5000)
  filled.release()
  const response = await answer
  await closed
  t.equal(response.status, 200)
  const { results } = (await response.json()) as { results: { status: number; link: { title: string | null } }[] }
  t.same(results.map((result) => result.status), Array(16).fill(201), 'every link stored')
  t.equal(pages.requests('/closing').length, 8, 'no page fetched once closing began')
  t.equal(results.filter((result) => result.link.title === 'Filled').length, 8, 'the pages fetched before filled their links')
})

t.test('once the instance is closing, a page fetch under way gets 3 s more at most, whatever AUTOFILL_TIMEOUT_MS: the create is answered', async (t) => {
  const pages = await startPageServer(t)
  pages.route('/never', answerWhenReleased(t, status(200)).handler)
  const { app: closing } = await buildTestApp(t, { database, env: { AUTOFILL_ALLOW_PRIVATE: 'true', AUTOFILL_TIMEOUT_MS: '60000' } })
  const token = await createWorkspaceToken(prisma, { workspace: 'fetch-closing', defaultDomain: 'go.fetch-closing.test' })
  await closing.listen({ port: 0, host: '127.0.0.1' })
  const { port } = closing.server.address() as AddressInfo
  const answer = fetch(`http://127.0.0.1:${port}/v1/links/create`, {
    method: 'POST',
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
    body: JSON.stringify({ link: { url: pages.url('/never'), id: 'fetch-closing' } }),
  })
  t.ok(await waitFor(() => pages.requests('/never').length === 1, 5000), 'the page is being fetched')
  const began = Date.now()
  const closed = closing.close()
  const response = await answer
  const waited = Date.now() - began
  t.equal(response.status, 201)
  t.equal(response.headers.get('x-autofill'), 'failed')
  t.ok(waited >= 2900 && waited < 6000, `answered ${waited} ms into the close, before its 6 s busy limit`)
  await closed
  t.equal(await prisma.link.count({ where: { slug: 'fetch-closing' } }), 1)
})
