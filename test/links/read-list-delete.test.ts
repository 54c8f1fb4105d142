/**
 * Issue 5, links: GET one (by uniq and by domain), the list (every filter, pages, stability under concurrent
 * creates), DELETE (both forms: the slug is free again, the link's pixels rows go, the pixels stay), and
 * isolation between workspaces on every route.
 */
import t from 'tap'
import { linkStatements } from '../support/link-statements.js'
import { apiClient } from '../support/api-client.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'

type Json = Record<string, any>

const { app, prisma, database } = await buildTestApp(t)

let workspaces = 0
/** A workspace of the subtest's own, with its default domain go.<name>.test. */
async function workspace() {
  const name = `ws${++workspaces}`
  const domain = `go.${name}.test`
  const token = await createWorkspaceToken(prisma, { workspace: name, defaultDomain: domain })
  const workspaceId = (await prisma.workspace.findUniqueOrThrow({ where: { name } })).id
  return { name, domain, workspaceId, api: apiClient(app, token) }
}

const ids = (response: { json(): unknown }) => (response.json() as Json).links.map((link: Json) => link.id)

t.test('GET /v1/links/{uniqId} answers the link record', async (t) => {
  const { api } = await workspace()
  const created = await api.link({ url: 'https://example.com/a', id: 'Summer', tags: ['a'], pixels: [{ platform: 'ga', value: 'UA-1' }] })
  const response = await api.get(`/v1/links/${created.uniq}`)
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^application\/json/)
  t.same(response.json(), created, 'the same record create answered')

  t.equal((await api.get('/v1/links/999999')).statusCode, 404)
  t.match(await api.get('/v1/links/99999999999'), { statusCode: 400, body: /"path":"\/uniqId"/ }, "beyond the column's range: a 400 naming the field (issue 12: path ids are integers up to 2147483647)")
  const bad = await api.get('/v1/links/abc')
  t.equal(bad.statusCode, 400)
  t.match(bad.headers['content-type'], /^application\/problem\+json/)
  t.match(bad.json(), { code: 'validation_failed', errors: [{ path: '/uniqId' }] })
  const anonymous = await app.inject({ method: 'GET', url: `/v1/links/${created.uniq}` })
  t.equal(anonymous.statusCode, 401)
  t.equal(anonymous.json().code, 'unauthorized')
})

t.test('create answers Location: /v1/links/{uniq}, the address of GET', async (t) => {
  const { api } = await workspace()
  const response = await api.post('/v1/links/create', { link: { url: 'https://example.com/loc', id: 'loc' } })
  t.equal(response.statusCode, 201)
  t.equal(response.headers.location, `/v1/links/${response.json().uniq}`)
  const located = await api.get(String(response.headers.location))
  t.equal(located.statusCode, 200)
  t.same(located.json(), response.json())
})

t.test('GET /v1/links/by-domain/{domain}/{id} matches the domain and slug in any case', async (t) => {
  const { api, domain } = await workspace()
  const created = await api.link({ url: 'https://example.com/b', id: 'Promo' })
  const response = await api.get(`/v1/links/by-domain/${domain.toUpperCase()}/pROMO`)
  t.equal(response.statusCode, 200)
  t.same(response.json(), created)
  t.equal((await api.get(`/v1/links/by-domain/${domain}/nope`)).statusCode, 404)
  t.equal((await api.get(`/v1/links/by-domain/other.test/Promo`)).statusCode, 404)
  t.equal((await api.get(`/v1/links/by-domain/not..a..host/Promo`)).statusCode, 404)
  t.equal((await app.inject({ method: 'GET', url: `/v1/links/by-domain/${domain}/Promo` })).statusCode, 401)
})

t.test('DELETE /v1/links/{uniqId}: 204, then 404, and the slug is free again', async (t) => {
  const { api, domain } = await workspace()
  const created = await api.link({ url: 'https://example.com/c', id: 'Gone', pixels: [{ platform: 'ga', value: 'UA-9' }] })
  const pixelId = created.pixels[0].id

  const response = await api.delete(`/v1/links/${created.uniq}`)
  t.equal(response.statusCode, 204)
  t.equal(response.body, '')
  t.equal((await api.get(`/v1/links/${created.uniq}`)).statusCode, 404)
  t.equal((await api.get(`/v1/links/by-domain/${domain}/Gone`)).statusCode, 404, 'the address no longer resolves')
  const again = await api.delete(`/v1/links/${created.uniq}`)
  t.equal(again.statusCode, 404)
  t.equal(again.json().code, 'not_found')

  t.equal(await prisma.link.count({ where: { uniq: created.uniq } }), 0, 'a hard delete')
  t.equal(await prisma.linkPixel.count({ where: { linkUniq: created.uniq } }), 0, 'its pixel rows went with it')
  t.equal(await prisma.pixel.count({ where: { id: pixelId } }), 1, 'the pixel itself stays in the workspace')

  const reused = await api.post('/v1/links/create', { link: { url: 'https://example.com/again', id: 'gONE' } })
  t.equal(reused.statusCode, 201, 'the slug, in another case too, can be used again')
  t.not(reused.json().uniq, created.uniq)

  t.equal((await api.delete('/v1/links/abc')).statusCode, 400)
  t.match(await api.delete('/v1/links/99999999999'), { statusCode: 400, body: /"path":"\/uniqId"/ }, "beyond the column's range: a 400 naming the field (issue 12: path ids are integers up to 2147483647)")
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/links/${reused.json().uniq}` })).statusCode, 401)
  t.equal((await api.get(`/v1/links/${reused.json().uniq}`)).statusCode, 200, 'a refused delete deletes nothing')
})

t.test('DELETE /v1/links/by-domain/{domain}/{id}: 204, then 404, and the slug is free again', async (t) => {
  const { api, domain } = await workspace()
  const created = await api.link({ url: 'https://example.com/d', id: 'Bye' })
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/links/by-domain/${domain}/Bye` })).statusCode, 401)
  const response = await api.delete(`/v1/links/by-domain/${domain.toUpperCase()}/bye`)
  t.equal(response.statusCode, 204)
  t.equal(response.body, '')
  t.equal((await api.get(`/v1/links/${created.uniq}`)).statusCode, 404)
  t.equal((await api.delete(`/v1/links/by-domain/${domain}/Bye`)).statusCode, 404, 'twice: 404')
  const reused = await api.post('/v1/links/create', { link: { url: 'https://example.com/again', id: 'Bye' } })
  t.equal(reused.statusCode, 201)
  t.equal((await api.delete(`/v1/links/by-domain/other.test/Bye`)).statusCode, 404)
})

t.test('DELETE: a link in no group takes one statement; one with a tag or folder moves its group history in a transaction', async (t) => {
  const { api, domain } = await workspace()
  const plain = await api.link({ url: 'https://example.com/plain', id: 'Plain' })
  const tagged = await api.link({ url: 'https://example.com/tagged', id: 'Tagged', tags: ['summer'] })
  // What the delete sends: the database's statements that name the links' table, and its transactions.
  const sent = linkStatements(t, database)

  t.equal((await api.delete(`/v1/links/${plain.uniq}`)).statusCode, 204)
  t.same(sent.splice(0), ['DELETE FROM "Link"'], 'by uniq: the DELETE alone')
  const again = await api.link({ url: 'https://example.com/plain', id: 'Plain' })
  sent.length = 0
  t.equal((await api.delete(`/v1/links/by-domain/${domain}/plain`)).statusCode, 204)
  t.same(sent.splice(0), ['DELETE FROM "Link"'], 'by domain and slug: the DELETE alone')
  t.equal(await prisma.link.count({ where: { uniq: { in: [plain.uniq, again.uniq] } } }), 0)

  t.equal((await api.delete(`/v1/links/${tagged.uniq}`)).statusCode, 204)
  t.same(sent.splice(0), ['DELETE FROM "Link"', 'SELECT l."uniq", l."workspaceId",', 'transaction'], 'with a tag: found, then deleted with its group history')
  t.equal(await prisma.link.count({ where: { uniq: tagged.uniq } }), 0)
  t.equal((await api.delete(`/v1/links/${tagged.uniq}`)).statusCode, 404, 'twice: 404')
})

t.test('GET /v1/links pages newest first: 20 by default, nextCursor until the last page', async (t) => {
  const { api } = await workspace()
  const created = []
  for (let i = 1; i <= 25; i++) created.push(await api.link({ url: `https://example.com/${i}`, id: `p${i}` }))
  const newestFirst = created.map((link) => link.id).reverse()

  const first = await api.get('/v1/links')
  t.equal(first.statusCode, 200)
  t.same(ids(first), newestFirst.slice(0, 20))
  t.same(first.json().links[0], created[24], 'full link records')
  t.type(first.json().nextCursor, 'string')

  const second = await api.get(`/v1/links?cursor=${first.json().nextCursor}`)
  t.same(ids(second), newestFirst.slice(20))
  t.equal(second.json().nextCursor, null, 'the last page says so')

  const exact = await api.get('/v1/links?limit=25')
  t.equal(exact.json().links.length, 25)
  t.equal(exact.json().nextCursor, null, 'no empty page after a page that ends the list')

  const small = await api.get('/v1/links?limit=1')
  t.same(ids(small), ['p25'])
  const hundred = await api.get('/v1/links?limit=100')
  t.equal(hundred.json().links.length, 25)

  const empty = await (await workspace()).api.get('/v1/links')
  t.same(empty.json(), { links: [], nextCursor: null })
})

t.test('GET /v1/links refuses a bad limit or cursor with 400 naming it', async (t) => {
  const { api } = await workspace()
  for (const limit of ['0', '101', 'ten', '1.5', '-1']) {
    const response = await api.get(`/v1/links?limit=${limit}`)
    t.equal(response.statusCode, 400, `limit=${limit}`)
    t.match(response.json(), { code: 'validation_failed', errors: [{ path: '/limit' }] })
  }
  const base64url = (text: string) => Buffer.from(text).toString('base64url')
  const cursors = ['garbage!', 'abc', base64url('not json'), base64url('{"x":1}'), base64url('{"u":-1}'), base64url('{"u":"5"}'),
    base64url('{"u":1.5}'), base64url('{"u":99999999999}'), base64url('[1]'), base64url('null')]
  for (const cursor of cursors) {
    const response = await api.get(`/v1/links?cursor=${encodeURIComponent(cursor)}`)
    t.equal(response.statusCode, 400, `cursor ${cursor}`)
    t.match(response.headers['content-type'], /^application\/problem\+json/)
    t.same(response.json().errors, [{ path: '/cursor', message: 'is not the nextCursor of a page of this list' }])
  }
  t.equal((await api.get(`/v1/links?cursor=${'a'.repeat(201)}`)).statusCode, 400, 'an overlong cursor')
  t.equal((await app.inject({ method: 'GET', url: '/v1/links' })).statusCode, 401)
})

t.test('GET /v1/links filters by domain', async (t) => {
  const name = `ws${++workspaces}`
  const token = await createWorkspaceToken(prisma, { workspace: name, domains: [`one.${name}.test`, `two.${name}.test`] })
  const api = apiClient(app, token)
  await api.link({ url: 'https://example.com/', domain: `one.${name}.test`, id: 'a' })
  await api.link({ url: 'https://example.com/', domain: `two.${name}.test`, id: 'b' })
  await api.link({ url: 'https://example.com/', domain: `one.${name}.test`, id: 'c' })
  t.same(ids(await api.get(`/v1/links?domain=one.${name}.test`)), ['c', 'a'])
  t.same(ids(await api.get(`/v1/links?domain=TWO.${name.toUpperCase()}.TEST.`)), ['b'], 'compared like stored hosts')
  t.same(ids(await api.get('/v1/links?domain=elsewhere.test')), [])
  const bad = await api.get('/v1/links?domain=not..a..host')
  t.equal(bad.statusCode, 400)
  t.same(bad.json().errors.map((e: Json) => e.path), ['/domain'])
})

t.test('GET /v1/links filters by folder', async (t) => {
  const { api, workspaceId } = await workspace()
  const folder = await prisma.folder.create({ data: { workspaceId, name: 'F' } })
  const other = await prisma.folder.create({ data: { workspaceId, name: 'G' } })
  await api.link({ url: 'https://example.com/', id: 'in1', folderId: folder.id })
  await api.link({ url: 'https://example.com/', id: 'out', folderId: other.id })
  await api.link({ url: 'https://example.com/', id: 'none' })
  await api.link({ url: 'https://example.com/', id: 'in2', folderId: String(folder.id) })
  t.same(ids(await api.get(`/v1/links?folderId=${folder.id}`)), ['in2', 'in1'])
  t.same(ids(await api.get('/v1/links?folderId=2147483647')), [], 'an unknown folder holds nothing')
  const bad = await api.get('/v1/links?folderId=abc')
  t.equal(bad.statusCode, 400)
  t.same(bad.json().errors.map((e: Json) => e.path), ['/folderId'])
})

t.test('GET /v1/links filters by tags: repeatable, all must match, any case', async (t) => {
  const { api } = await workspace()
  const a = await api.link({ url: 'https://example.com/', id: 'a', tags: ['Summer', 'Email'] })
  await api.link({ url: 'https://example.com/', id: 'b', tags: 'summer' })
  await api.link({ url: 'https://example.com/', id: 'c', tags: ['email', 'SUMMER', 'social'] })
  await api.link({ url: 'https://example.com/', id: 'd' })
  t.same(ids(await api.get('/v1/links?tag=summer')), ['c', 'b', 'a'])
  t.same(ids(await api.get('/v1/links?tag=SUMMER&tag=Email')), ['c', 'a'], 'every tag must be present')
  t.same(ids(await api.get('/v1/links?tag=summer&tag=email&tag=social')), ['c'])
  t.same(ids(await api.get('/v1/links?tag=summ')), [], 'whole tags, not substrings')
  t.same(ids(await api.get('/v1/links?tag=nothing')), [])

  // The filter follows updates of the tags.
  t.equal((await api.put(`/v1/links/${a.uniq}`, { link: { tags: 'Winter' } })).statusCode, 200)
  t.same(ids(await api.get('/v1/links?tag=winter')), ['a'])
  t.same(ids(await api.get('/v1/links?tag=email')), ['c'])

  for (const blank of ['', '%20', '%20%20&tag=winter', 'winter&tag=']) {
    const response = await api.get(`/v1/links?tag=${blank}`)
    t.equal(response.statusCode, 400, `tag=${blank}: blank, not ignored (which listed every link)`)
    t.match(response.json(), { code: 'validation_failed', errors: [{ path: '/tag', message: 'must not be blank' }] })
  }
  t.equal((await api.get(`/v1/links?tag=${'x'.repeat(65)}`)).statusCode, 400)
})

t.test('GET /v1/links searches slug, url, title and note, ignoring case; % and _ are plain characters', async (t) => {
  const { api } = await workspace()
  await api.link({ url: 'https://example.com/', id: 'Black-Friday' })
  await api.link({ url: 'https://shop.example.com/FRIDAY-deals', id: 'u' })
  await api.link({ url: 'https://example.com/', id: 't', title: 'Last friday offer' })
  await api.link({ url: 'https://example.com/', id: 'n', note: 'for FrIdAy newsletter' })
  await api.link({ url: 'https://example.com/', id: 'x', title: 'Monday', description: 'friday in the description only' })
  await api.link({ url: 'https://example.com/', id: 'pct', title: '50% off' })
  await api.link({ url: 'https://example.com/', id: 'snake_case' })
  t.same(ids(await api.get('/v1/links?q=friday')), ['n', 't', 'u', 'Black-Friday'])
  t.same(ids(await api.get(`/v1/links?q=${encodeURIComponent('0% o')}`)), ['pct'])
  t.same(ids(await api.get('/v1/links?q=_')), ['snake_case'], '_ is no wildcard')
  t.same(ids(await api.get(`/v1/links?q=${encodeURIComponent('%')}`)), ['pct'], '% is no wildcard')
  t.same(ids(await api.get(`/v1/links?q=${encodeURIComponent('\\')}`)), [], 'nor is a backslash an escape')
  t.equal((await api.get('/v1/links?q=')).statusCode, 400)
})

t.test('GET /v1/links filters by creation time: createdAfter inclusive, createdBefore exclusive', async (t) => {
  const { api } = await workspace()
  const times = ['2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z']
  for (const [index, time] of times.entries()) {
    const link = await api.link({ url: 'https://example.com/', id: `m${index + 1}` })
    await prisma.link.update({ where: { uniq: link.uniq }, data: { createdAt: new Date(time) } })
  }
  t.same(ids(await api.get('/v1/links?createdAfter=2026-02-01T00:00:00Z')), ['m3', 'm2'], 'after: inclusive')
  t.same(ids(await api.get('/v1/links?createdBefore=2026-02-01T00:00:00Z')), ['m1'], 'before: exclusive')
  t.same(
    ids(await api.get(`/v1/links?createdAfter=${encodeURIComponent('2026-01-15T00:00:00+01:00')}&createdBefore=2026-03-01T00:00:00.000Z`)),
    ['m2'],
    'both, with an offset',
  )
  t.same(ids(await api.get('/v1/links?createdAfter=2026-03-01T00:00:00.001Z')), [])
  // The format allows years 0000 to 9999 in any offset; outside 0001–9999 in UTC, PostgreSQL refused them (a 500).
  const outOfRange = [
    'createdAfter=0000-01-01T00:00:00Z',
    `createdBefore=${encodeURIComponent('0001-01-01T00:30:00+01:00')}`,
    'createdAfter=9999-12-31T23:00:00-02:00',
  ]
  for (const query of ['createdAfter=yesterday', 'createdBefore=2026-01-01', 'createdAfter=2026-12-31T23:59:61Z', ...outOfRange]) {
    const response = await api.get(`/v1/links?${query}`)
    t.equal(response.statusCode, 400, query)
    t.same(response.json().errors.map((e: Json) => e.path), [`/${query.split('=')[0]}`])
  }
  t.match((await api.get(`/v1/links?${outOfRange[0]}`)).json().errors[0].message, /between the years 0001 and 9999/)
  t.same(ids(await api.get('/v1/links?createdAfter=0001-01-01T00:00:00Z&createdBefore=9999-12-31T23:59:59.999Z')), ['m3', 'm2', 'm1'], 'the widest range')
  // A leap second is the first instant of the next minute (RFC 3339 allows 23:59:60; a JavaScript Date does not).
  t.same(ids(await api.get('/v1/links?createdAfter=2026-01-31T23:59:60Z')), ['m3', 'm2'], 'after 23:59:60 on 01-31: inclusive of 02-01 00:00')
  // Digits past the millisecond (stored times have milliseconds): both bounds round up to the next one.
  t.same(ids(await api.get('/v1/links?createdAfter=2026-02-01T00:00:00.0001Z')), ['m3'], 'after 00:00:00.000, the link made then is not')
  t.same(ids(await api.get('/v1/links?createdBefore=2026-02-01T00:00:00.0001Z')), ['m2', 'm1'], 'before 00:00:00.0001, the link made at .000 is')
  t.same(ids(await api.get('/v1/links?createdBefore=9999-12-31T23:59:59.9995Z')), ['m3', 'm2', 'm1'], 'the last instant of the range, not past it (a 500 once)')
})

t.test('GET /v1/links combines every filter, and pages within them', async (t) => {
  const name = `ws${++workspaces}`
  const token = await createWorkspaceToken(prisma, { workspace: name, domains: [`a.${name}.test`, `b.${name}.test`] })
  const api = apiClient(app, token)
  const workspaceId = (await prisma.workspace.findUniqueOrThrow({ where: { name } })).id
  const folder = await prisma.folder.create({ data: { workspaceId, name: 'F' } })
  const match = { url: 'https://example.com/sale', domain: `a.${name}.test`, folderId: folder.id, tags: ['Promo', 'x'], title: 'Big Sale' }
  const wanted = []
  for (let i = 1; i <= 5; i++) wanted.push((await api.link({ ...match, id: `hit${i}` })).id)
  // Each of these misses exactly one filter.
  await api.link({ ...match, id: 'other-domain', domain: `b.${name}.test` })
  await api.link({ ...match, id: 'no-folder', folderId: null })
  await api.link({ ...match, id: 'other-tag', tags: ['x'] })
  await api.link({ ...match, id: 'no-text', title: 'Nothing', url: 'https://example.com/' })
  const old = await api.link({ ...match, id: 'too-old' })
  await prisma.link.update({ where: { uniq: old.uniq }, data: { createdAt: new Date('2020-01-01T00:00:00Z') } })

  const filters = `domain=a.${name}.test&folderId=${folder.id}&tag=promo&tag=X&q=SALE&createdAfter=2021-01-01T00:00:00Z&createdBefore=2999-01-01T00:00:00Z`
  const first = await api.get(`/v1/links?${filters}&limit=2`)
  t.same(ids(first), ['hit5', 'hit4'])
  const second = await api.get(`/v1/links?${filters}&limit=2&cursor=${first.json().nextCursor}`)
  t.same(ids(second), ['hit3', 'hit2'])
  const third = await api.get(`/v1/links?${filters}&limit=2&cursor=${second.json().nextCursor}`)
  t.same(ids(third), ['hit1'])
  t.equal(third.json().nextCursor, null)
  t.equal(wanted.length, 5)
})

t.test('paging while links are created concurrently: no duplicates, no gaps', async (t) => {
  const { api } = await workspace()
  const existing = new Set<number>()
  for (let i = 1; i <= 45; i++) existing.add((await api.link({ url: 'https://example.com/', id: `s${i}` })).uniq)

  const seen: number[] = []
  let cursor: string | null = null
  let created = 0
  do {
    const url: string = `/v1/links?limit=10${cursor ? `&cursor=${cursor}` : ''}`
    // New links are created while the page is read and between pages.
    const [page] = await Promise.all([
      api.get(url),
      ...[1, 2, 3].map(() => api.link({ url: 'https://example.com/new', id: `new${++created}` })),
    ])
    t.equal(page.statusCode, 200)
    seen.push(...page.json().links.map((link: Json) => link.uniq))
    cursor = page.json().nextCursor
  } while (cursor)

  t.equal(new Set(seen).size, seen.length, 'no link twice')
  t.same(seen, [...seen].sort((a, b) => b - a), 'newest first throughout')
  for (const uniq of existing) t.equal(seen.filter((one) => one === uniq).length, 1, `link ${uniq} seen exactly once`)
  t.ok(created >= 15, 'links were created during the paging')
})

t.test('GET /v1/links: the same pages every time, once PostgreSQL plans the statement for any workspace', async (t) => {
  // After five runs on one connection PostgreSQL may keep one plan for every workspace and page size: the pages
  // of a workspace whose links lie between another's must come out the same, records and all, every time.
  const a = await workspace()
  const b = await workspace()
  const mine: Json[] = []
  for (let i = 1; i <= 12; i++) {
    const pixels = i % 3 === 0 ? [{ platform: 'ga', value: `G-${i}` }] : undefined
    mine.push(await a.api.link({ url: `https://example.com/${i}`, id: `a${i}`, pixels }))
    await b.api.link({ url: `https://example.com/${i}`, id: `b${i}` })
  }
  const newestFirst = mine.reverse()
  for (let run = 1; run <= 8; run++) {
    const pages: Json[][] = []
    let cursor: string | null = null
    do {
      const response = await a.api.get(`/v1/links?limit=5${cursor ? `&cursor=${cursor}` : ''}`)
      t.equal(response.statusCode, 200)
      pages.push(response.json().links)
      cursor = response.json().nextCursor
    } while (cursor)
    t.same(pages, [newestFirst.slice(0, 5), newestFirst.slice(5, 10), newestFirst.slice(10)], `run ${run}: whole records, in order`)
    t.same(ids(await b.api.get('/v1/links?limit=3')), ['b12', 'b11', 'b10'], `run ${run}: the other workspace's first page`)
  }
})

t.test('isolation: another workspace cannot see, list or delete the links', async (t) => {
  const a = await workspace()
  const b = await workspace()
  const link = await a.api.link({ url: 'https://example.com/', id: 'mine', tags: ['shared-tag'], title: 'findme' })
  const folder = await prisma.folder.create({ data: { workspaceId: a.workspaceId, name: 'A folder' } })
  await a.api.put(`/v1/links/${link.uniq}`, { link: { folderId: folder.id } })
  const theirs = await b.api.link({ url: 'https://example.com/', id: 'theirs', tags: ['shared-tag'], title: 'findme' })

  t.equal((await b.api.get(`/v1/links/${link.uniq}`)).statusCode, 404)
  t.equal((await b.api.get(`/v1/links/by-domain/${a.domain}/mine`)).statusCode, 404)
  t.equal((await b.api.delete(`/v1/links/${link.uniq}`)).statusCode, 404)
  t.equal((await b.api.delete(`/v1/links/by-domain/${a.domain}/mine`)).statusCode, 404)
  t.same(ids(await b.api.get('/v1/links')), ['theirs'])
  t.same(ids(await b.api.get('/v1/links?tag=shared-tag&q=findme')), ['theirs'])
  t.same(ids(await b.api.get(`/v1/links?domain=${a.domain}`)), [])
  t.same(ids(await b.api.get(`/v1/links?folderId=${folder.id}`)), [])
  // A cursor is a position in the caller's own list, never a way into another workspace's links.
  const at = (uniq: number) => Buffer.from(JSON.stringify({ u: uniq })).toString('base64url')
  t.same(ids(await b.api.get(`/v1/links?cursor=${at(link.uniq + 1)}`)), [])
  t.same(ids(await b.api.get(`/v1/links?cursor=${at(theirs.uniq + 1)}`)), ['theirs'])

  t.equal((await a.api.get(`/v1/links/${link.uniq}`)).statusCode, 200, "A's link is untouched")
  t.same(ids(await a.api.get('/v1/links')), ['mine'])
})
