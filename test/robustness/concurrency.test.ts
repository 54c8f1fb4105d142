/**
 * Issue 9, items 1-4: concurrent writers on real PostgreSQL. No race ends in a 500, and the invariants hold:
 * a link's pixel list is the list of exactly one writer; no stored updatedDate is older than one returned to
 * any writer; every 201 is stored and nothing is stored for an error; two creates of one slug give one 201
 * and one 409; a folder or pixel deleted while a link is being filed under it is a 400 naming the field.
 *
 * The races need the real PostgreSQL (DATABASE_URL). Without it the file runs on the embedded PGlite, where
 * one connection serialises every transaction: it passes there, but proves little.
 *
 * A busy database may answer 503 (with Retry-After): a writer of a link that waited longer than it may for
 * its turn, a transaction that could not get a connection in time. How many depends on the machine's speed,
 * so the tests allow it and assert the invariants on what succeeded. On the development machine (2 cores,
 * shared) every request of these bursts succeeded when it was quiet; under a load average of 10, up to about
 * half of the 300 updates of one link were 503 in the mixed burst.
 *
 * Sizes: the (300 updates + 300 creates at once, 200 title updates, 30 and 20 pixel writers) on
 * PostgreSQL, a fifth of them on PGlite (serialised, slow, and proving little). CONCURRENCY_SCALE=<factor>
 * sets the factor (e.g. CONCURRENCY_SCALE=3 for a longer run by hand).
 */
import type { LightMyRequestResponse } from 'fastify'
import { Writable } from 'node:stream'
import pg from 'pg'
import t, { type Test } from 'tap'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { buildTestApp, client, createWorkspaceToken, openTestDatabase } from '../support/test-app.js'

type Json = Record<string, any>

/** Every line the app logs at warn and above; a level-50 line is a 500 or worse. */
const logLines: Json[] = []
const logStream = new Writable({
  write(chunk, _encoding, done) {
    for (const line of String(chunk).split('\n')) if (line) logLines.push(JSON.parse(line))
    done()
  },
})

const { database, url: databaseUrl } = await openTestDatabase(t)
const { app, prisma } = await buildTestApp(t, { database, logger: { level: 'warn', stream: logStream } })
const onPostgres = database.kind === 'postgres'
const SCALE = Number(process.env.CONCURRENCY_SCALE ?? (onPostgres ? 1 : 0.2))
const size = (n: number) => Math.max(2, Math.round(n * SCALE))

let workspaces = 0
async function workspace() {
  const name = `race${++workspaces}`
  const domain = `go.${name}.test`
  const token = await createWorkspaceToken(prisma, { workspace: name, defaultDomain: domain })
  await setLimits(prisma, { workspace: name, hour: 100_000, day: 100_000 })
  return { name, domain, token, api: client(app, token) }
}

const send = (method: 'POST' | 'PUT' | 'DELETE', url: string, token: string, body?: unknown) =>
  app.inject({
    method,
    url,
    headers: { 'api-authorization': token, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    payload: body === undefined ? undefined : JSON.stringify(body),
  })

function statuses(responses: LightMyRequestResponse[]): Record<number, number> {
  const counts: Record<number, number> = {}
  for (const response of responses) counts[response.statusCode] = (counts[response.statusCode] ?? 0) + 1
  return counts
}

/**
 * No 500: each answer is the expected success, or a 503 with Retry-After (a busy database). Answers the
 * indexes of the successes.
 */
function succeededOrBusy(t: Test, responses: LightMyRequestResponse[], success: number | number[]): number[] {
  const counts = statuses(responses)
  t.comment(JSON.stringify(counts))
  t.notOk(counts[500], 'no 500')
  const expected = [success].flat()
  const unexpected = responses.filter((r) => !expected.includes(r.statusCode) && r.statusCode !== 503)
  t.same(unexpected.slice(0, 3).map((r) => `${r.statusCode} ${r.body}`), [], `every answer is ${expected.join(' or ')} or 503`)
  for (const response of responses.filter((r) => r.statusCode === 503)) {
    t.equal(response.json().code, 'unavailable')
    t.match(response.headers['retry-after'], /^[1-9]\d*$/)
  }
  return responses.flatMap((r, i) => (expected.includes(r.statusCode) ? [i] : []))
}

async function newLink(api: ReturnType<typeof client>, link: Json = {}): Promise<Json> {
  const response = await api.create({ url: 'https://example.com/start', ...link }, { autofill: false })
  if (response.statusCode !== 201) throw new Error(response.body)
  return response.json()
}

const pixelList = (link: Json) => link.pixels.map((pixel: Json) => `${pixel.platform}:${pixel.value}`)

t.test('item 1: parallel pixel updates of one link replace the list; the last writer wins whole', async (t) => {
  const { api } = await workspace()
  const link = await newLink(api, { pixels: [{ platform: 'ga', value: 'R-start' }] })
  const writers = size(30)
  const responses = await Promise.all(
    Array.from({ length: writers }, (_, i) =>
      api.update(link.uniq, { pixels: [{ platform: 'ga', value: `R-${i}` }] }, { autofill: false }),
    ),
  )
  const succeeded = succeededOrBusy(t, responses, 200)
  for (const i of succeeded) t.same(pixelList(responses[i].json()), [`ga:R-${i}`], `writer ${i} sees its own list`)
  const stored = await prisma.linkPixel.findMany({ where: { linkUniq: link.uniq }, include: { pixel: true } })
  t.equal(stored.length, 1, 'the link holds one pixel, not a merge of the writers')
  const final = (await api.send('PUT', `/v1/links/${link.uniq}`, { link: {} })).json()
  t.ok(
    succeeded.map((i) => `ga:R-${i}`).includes(pixelList(final).join()),
    `the final list ${pixelList(final)} is one successful writer's`,
  )
})

t.test('item 1: writers sending the same pixel list, and the same pixels in opposite orders, all succeed', async (t) => {
  const { api } = await workspace()
  const link = await newLink(api)
  const same = [{ platform: 'ga', value: 'S-1' }, { platform: 'facebook', value: 'S-2' }]
  const writers = size(20)
  const responses = await Promise.all(
    Array.from({ length: writers }, () => api.update(link.uniq, { pixels: same }, { autofill: false })),
  )
  succeededOrBusy(t, responses, 200)
  const final = (await api.send('PUT', `/v1/links/${link.uniq}`, { link: {} })).json()
  t.same(pixelList(final), ['ga:S-1', 'facebook:S-2'])

  // New pixels taken in opposite orders by concurrent transactions: the classic deadlock.
  const forward = Array.from({ length: 6 }, (_, i) => ({ platform: 'gtm', value: `O-${i}` }))
  const backward = forward.slice().reverse()
  const other = await newLink(api)
  const crossed = await Promise.all(
    Array.from({ length: writers }, (_, i) =>
      i % 2
        ? api.update(i % 4 === 1 ? link.uniq : other.uniq, { pixels: forward }, { autofill: false })
        : api.create({ url: 'https://example.com/crossed', pixels: backward }, { autofill: false }),
    ),
  )
  succeededOrBusy(t, crossed, [200, 201])
  const lists = [forward, backward].map((list) => list.map((pixel) => `${pixel.platform}:${pixel.value}`).join())
  for (const uniq of [link.uniq, other.uniq]) {
    const stored = (await api.send('PUT', `/v1/links/${uniq}`, { link: {} })).json()
    t.ok(lists.includes(pixelList(stored).join()), `link ${uniq} holds one writer's list`)
  }
})

t.test('items 2 and 3: parallel title updates of one link; stored updatedDate is never older than one returned', async (t) => {
  const { api } = await workspace()
  const link = await newLink(api)
  const writers = size(200)
  const responses = await Promise.all(
    Array.from({ length: writers }, (_, i) => api.update(link.uniq, { title: `title ${i}` }, { autofill: false })),
  )
  const succeeded = succeededOrBusy(t, responses, 200).map((i) => responses[i].json())
  const latest = succeeded.map((record) => record.updatedDate as string).sort().at(-1)
  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
  t.ok(
    stored.updatedAt.toISOString() >= latest!,
    `stored ${stored.updatedAt.toISOString()} is not older than the latest returned ${latest}`,
  )
  const lastWriters = succeeded.filter((record) => record.updatedDate === latest).map((record) => record.title)
  t.ok(lastWriters.includes(stored.title), `the stored title ${stored.title} is one of the last writers' (${lastWriters})`)
})

t.test('item 2: 300 updates of one link and 300 creates at once', async (t) => {
  const { api, domain } = await workspace()
  const link = await newLink(api)
  const count = size(300)
  const [updates, creates] = await Promise.all([
    Promise.all(Array.from({ length: count }, (_, i) => api.update(link.uniq, { note: `note ${i}` }, { autofill: false }))),
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        api.create({ url: `https://example.com/mass/${i}`, id: `mass-${i}`, tags: ['mass'] }, { autofill: false }),
      ),
    ),
  ])
  const updated = succeededOrBusy(t, updates, 200)
  succeededOrBusy(t, creates, 201)

  // Every 201 is stored as answered; nothing is stored for a create that failed.
  const stored = await prisma.link.findMany({ where: { domain, slug: { startsWith: 'mass-' } } })
  const byUniq = new Map(stored.map((row) => [row.uniq, row]))
  const created = creates.filter((r) => r.statusCode === 201).map((r) => r.json())
  t.equal(stored.length, created.length, 'as many links stored as 201s answered')
  t.ok(
    created.every((record) => byUniq.get(record.uniq)?.url === record.url && byUniq.get(record.uniq)?.slug === record.id),
    'each 201 is the stored link',
  )
  const final = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
  const latest = updated.map((i) => updates[i].json().updatedDate as string).sort().at(-1)
  if (latest) t.ok(final.updatedAt.toISOString() >= latest, 'stored updatedDate not older than any returned')
})

t.test('two creates of one slug: one 201 and one 409, every time', async (t) => {
  const { api, domain } = await workspace()
  const pairs = size(40)
  const responses = await Promise.all(
    Array.from({ length: pairs * 2 }, (_, i) =>
      api.create({ url: `https://example.com/pair/${i}`, id: `Pair-${i >> 1}`, pixels: [{ platform: 'ga', value: `P-${i >> 1}` }] }, { autofill: false }),
    ),
  )
  succeededOrBusy(t, responses, [201, 409])
  for (let pair = 0; pair < pairs; pair++) {
    const both = [responses[pair * 2], responses[pair * 2 + 1]]
    const answered = both.filter((r) => r.statusCode !== 503)
    // A 503 (busy) leaves the other alone, which then succeeds.
    t.same(answered.map((r) => r.statusCode).sort(), answered.length === 2 ? [201, 409] : [201], `pair ${pair}`)
    const winners = both.filter((r) => r.statusCode === 201).map((r) => r.json().url)
    const stored = await prisma.link.findMany({ where: { domain, slugKey: `pair-${pair}` } })
    t.same(stored.map((row) => row.url), winners, 'the stored link is the one answered 201')
  }
})

/**
 * A second connection holds a row lock as a transaction that is deleting the row would, lets the request
 * run into it (its foreign-key check waits), then deletes the row and commits: the request's reference
 * is gone under it, deterministically.
 */
async function deleteUnderRequest(
  t: Test,
  lockRow: string,
  deleteRow: string,
  request: () => Promise<LightMyRequestResponse>,
): Promise<LightMyRequestResponse> {
  const side = new pg.Client({ connectionString: databaseUrl })
  await side.connect()
  t.teardown(() => side.end())
  await side.query('BEGIN')
  await side.query(lockRow)
  const pending = request()
  // Wait until a backend of the app waits for a lock (the foreign-key check of its insert).
  for (let attempt = 0; ; attempt++) {
    const { rows } = await side.query(
      `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    )
    if (rows[0].waiting > 0) break
    if (attempt > 500) throw new Error('the request never waited for the lock')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  await side.query(deleteRow)
  await side.query('COMMIT')
  return pending
}

const skipOnEmbedded = onPostgres ? false : 'needs a second connection to PostgreSQL (DATABASE_URL)'

t.test('item 4: a folder deleted while a create or update files a link in it is a 400 naming /link/folderId', { skip: skipOnEmbedded }, async (t) => {
  const { api, name } = await workspace()
  const ws = await prisma.workspace.findUniqueOrThrow({ where: { name } })
  for (const operation of ['create', 'update'] as const) {
    const folder = await prisma.folder.create({ data: { workspaceId: ws.id, name: `doomed ${operation}` } })
    const link = await newLink(api)
    const response = await deleteUnderRequest(
      t,
      `SELECT 1 FROM "Folder" WHERE "id" = ${folder.id} FOR UPDATE`,
      `DELETE FROM "Folder" WHERE "id" = ${folder.id}`,
      () =>
        operation === 'create'
          ? api.create({ url: 'https://example.com/filed', id: 'filed-away', folderId: folder.id }, { autofill: false })
          : api.update(link.uniq, { folderId: folder.id, title: 'filed' }, { autofill: false }),
    )
    t.equal(response.statusCode, 400, `${operation}: ${response.body}`)
    t.same(response.json().errors?.map((error: Json) => error.path), ['/link/folderId'])
    const unchanged = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
    t.equal(unchanged.title, null, 'nothing of the update is stored')
    t.equal(await prisma.link.count({ where: { slug: 'filed-away' } }), 0, 'nothing of the create is stored')
  }
})

t.test('item 4: a pixel deleted while a create or update uses it is a 400 naming /link/pixels', { skip: skipOnEmbedded }, async (t) => {
  const { api, name } = await workspace()
  const ws = await prisma.workspace.findUniqueOrThrow({ where: { name } })
  for (const operation of ['create', 'update'] as const) {
    const pixel = await prisma.pixel.create({ data: { workspaceId: ws.id, platform: 'ga', value: `doomed-${operation}` } })
    const link = await newLink(api)
    const pixels = [{ platform: 'facebook', value: 'kept' }, pixel.id]
    const response = await deleteUnderRequest(
      t,
      `SELECT 1 FROM "Pixel" WHERE "id" = '${pixel.id}' FOR UPDATE`,
      `DELETE FROM "Pixel" WHERE "id" = '${pixel.id}'`,
      () =>
        operation === 'create'
          ? api.create({ url: 'https://example.com/tagged', id: 'tagged', pixels }, { autofill: false })
          : api.update(link.uniq, { pixels, title: 'tagged' }, { autofill: false }),
    )
    t.equal(response.statusCode, 400, `${operation}: ${response.body}`)
    t.match(response.json().errors?.map((error: Json) => error.path), [/^\/link\/pixels/])
    t.equal((await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).title, null, 'nothing of the update is stored')
    t.equal(await prisma.link.count({ where: { slug: 'tagged' } }), 0, 'nothing of the create is stored')
    t.equal(await prisma.pixel.count({ where: { workspaceId: ws.id, value: 'kept' } }), 0, 'nor the pixel it would have added')
  }
})

t.test('deletes of links, folders, pixels and scripts racing the link writes: no 500, no dangling reference', async (t) => {
  const { api, name, token } = await workspace()
  const ws = await prisma.workspace.findUniqueOrThrow({ where: { name } })
  const rounds = size(20)
  const responses: LightMyRequestResponse[] = []
  for (let round = 0; round < rounds; round++) {
    const folder = await prisma.folder.create({ data: { workspaceId: ws.id, name: `folder ${round}` } })
    const pixel = await prisma.pixel.create({ data: { workspaceId: ws.id, platform: 'ga', value: `round-${round}` } })
    const script = await prisma.script.create({ data: { workspaceId: ws.id, name: `script ${round}`, content: '<i></i>' } })
    const link = await newLink(api, { folderId: folder.id, pixels: [pixel.id] })
    const other = await newLink(api)
    responses.push(
      ...(await Promise.all([
        api.update(link.uniq, { folderId: folder.id, pixels: [pixel.id, { platform: 'gtm', value: `new-${round}` }] }, { autofill: false }),
        api.create({ url: 'https://example.com/racing', folderId: folder.id, pixels: [pixel.id], linkScripts: [script.id] }, { autofill: false }),
        api.update(other.uniq, { pixels: [pixel.id], linkScripts: [script.id] }, { autofill: false }),
        send('DELETE', `/v1/folders/${folder.id}?force=true`, token),
        send('DELETE', `/v1/pixels/${pixel.id}`, token),
        send('DELETE', `/v1/scripts/${script.id}`, token),
        api.update(link.uniq, { title: `round ${round}` }, { autofill: false }),
        send('DELETE', `/v1/links/${link.uniq}`, token),
      ])),
    )
  }
  const scripts = new Set((await prisma.script.findMany({ where: { workspaceId: ws.id } })).map((script) => script.id))
  const named = (await prisma.link.findMany({ where: { workspaceId: ws.id } })).flatMap((link) => (link.linkScripts as number[] | null) ?? [])
  t.same(named.filter((id) => !scripts.has(id)), [], 'no link names a script that is gone')
  succeededOrBusy(t, responses, [200, 201, 204, 400, 404])
  const refusals = responses.filter((r) => r.statusCode === 400).flatMap((r) => r.json().errors.map((e: Json) => e.path))
  t.ok(refusals.every((path: string) => /^\/link\/(folderId|pixels|linkScripts)/.test(path)), `400s name the field: ${refusals}`)
})

t.test('the log holds no error line: contention is not an internal error', async (t) => {
  const errors = new Map<string, number>()
  for (const line of logLines.filter((line) => line.level >= 50)) {
    const key = `${line.msg}: ${line.err?.code ?? ''} ${String(line.err?.message).slice(0, 200)}`
    errors.set(key, (errors.get(key) ?? 0) + 1)
  }
  t.same(Object.fromEntries(errors), {}, 'no level-50 line (each distinct one with its count)')
  const warnings = new Map<string, number>()
  for (const line of logLines.filter((line) => line.level === 40)) {
    const key = `${line.msg}: ${line.err?.code ?? ''} ${String(line.err?.message).slice(-120)}`
    warnings.set(key, (warnings.get(key) ?? 0) + 1)
  }
  t.comment(`warnings (503s and their causes): ${JSON.stringify(Object.fromEntries(warnings), null, 1)}`)
})
