/**
 * Issue 5, pixels: list, create (one per platform and value in a workspace), update, delete (the links that
 * used the pixel lose it), every failure code, and isolation between workspaces.
 */
import t from 'tap'
import { Prisma } from '../../src/generated/prisma/client.js'
import { apiClient } from '../support/api-client.js'
import { holdRowLock, waitForLockWaiters } from '../support/row-lock.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'

type Json = Record<string, any>

const { app, prisma } = await buildTestApp(t)
const UNKNOWN = '00000000-0000-4000-8000-000000000000'

let workspaces = 0
async function workspace() {
  const name = `ws${++workspaces}`
  const token = await createWorkspaceToken(prisma, { workspace: name, defaultDomain: `go.${name}.test` })
  return { token, api: apiClient(app, token) }
}

async function pixel(api: ReturnType<typeof apiClient>, body: Json): Promise<Json> {
  const response = await api.post('/v1/pixels', body)
  if (response.statusCode !== 201) throw new Error(response.body)
  return response.json()
}

t.test('POST /v1/pixels creates a pixel that links can use; GET lists them oldest first', async (t) => {
  const { api } = await workspace()
  const response = await api.post('/v1/pixels', { platform: 'facebook', value: '123', title: 'Retargeting' })
  t.equal(response.statusCode, 201)
  const created = response.json()
  t.match(created, { id: /^[0-9a-f-]{36}$/, platform: 'facebook', value: '123', title: 'Retargeting', workspaceId: Number })
  const untitled = await pixel(api, { platform: 'ga', value: 'UA-1' })
  t.equal(untitled.title, null)

  const list = await api.get('/v1/pixels')
  t.equal(list.statusCode, 200)
  t.same(list.json(), { pixels: [created, untitled] })

  const link = await api.link({ url: 'https://example.com/', pixels: [created.id, { platform: 'ga', value: 'UA-1' }] })
  t.same(link.pixels, [created, untitled], 'a link names it by id, or by platform and value')
  t.same((await api.get('/v1/pixels')).json().pixels.length, 2, 'and no pixel was added by the link')
  t.same((await (await workspace()).api.get('/v1/pixels')).json(), { pixels: [] })
})

t.test('POST /v1/pixels refuses bad bodies, an existing platform and value, non-JSON and missing tokens', async (t) => {
  const { api, token } = await workspace()
  const existing = await pixel(api, { platform: 'gtm', value: 'GTM-1' })
  const cases: [Json, string[]][] = [
    [{}, ['/platform', '/value']],
    [{ platform: 'myspace', value: '1' }, ['/platform']],
    [{ platform: 'ga', value: '' }, ['/value']],
    [{ platform: 'ga', value: '   ' }, ['/value']],
    [{ platform: 'ga', value: 5 }, ['/value']],
    [{ platform: 'ga', value: 'x'.repeat(513) }, ['/value']],
    [{ platform: 'ga', value: '1', title: 7 }, ['/title']],
  ]
  for (const [body, paths] of cases) {
    const response = await api.post('/v1/pixels', body)
    t.equal(response.statusCode, 400, JSON.stringify(body))
    t.same(response.json().errors.map((e: Json) => e.path), paths)
  }
  const duplicate = await api.post('/v1/pixels', { platform: 'gtm', value: 'GTM-1', title: 'again' })
  t.equal(duplicate.statusCode, 409)
  t.equal(duplicate.json().code, 'pixel_exists')
  t.match(duplicate.json().detail, existing.id, 'the detail names the pixel already there')
  t.equal((await api.post('/v1/pixels', { platform: 'ga', value: 'GTM-1' })).statusCode, 201, 'another platform is another pixel')

  const text = await app.inject({ method: 'POST', url: '/v1/pixels', headers: { 'api-authorization': token }, payload: 'x' })
  t.equal(text.statusCode, 415)
  const anonymous = await app.inject({
    method: 'POST', url: '/v1/pixels', headers: { 'content-type': 'application/json' }, payload: '{"platform":"ga","value":"z"}',
  })
  t.equal(anonymous.statusCode, 401)
  t.equal((await app.inject({ method: 'GET', url: '/v1/pixels' })).statusCode, 401)
  t.equal(await prisma.pixel.count({ where: { value: 'z' } }), 0)
})

t.test('PUT /v1/pixels/{uuid} changes the fields present, and the links follow', async (t) => {
  const { api, token } = await workspace()
  const created = await pixel(api, { platform: 'bing', value: 'B-1', title: 'Bing' })
  const link = await api.link({ url: 'https://example.com/', pixels: [created.id] })
  const other = await api.link({ url: 'https://example.com/other' })
  await new Promise((resolve) => setTimeout(resolve, 5))

  const retitled = await api.put(`/v1/pixels/${created.id}`, { title: 'Bing ads' })
  t.equal(retitled.statusCode, 200)
  t.same(retitled.json(), { ...created, title: 'Bing ads' })
  // The record of a link that uses the pixel changed with it (README: a new updatedDate).
  const followed = (await api.get(`/v1/links/${link.uniq}`)).json()
  t.same(followed.pixels, [retitled.json()])
  t.ok(followed.updatedDate > link.updatedDate, 'a link whose pixel changed has a new updatedDate')
  t.same((await api.get(`/v1/links/${other.uniq}`)).json(), other, 'a link without it is untouched')
  await new Promise((resolve) => setTimeout(resolve, 5))
  t.same((await api.put(`/v1/pixels/${created.id}`, { title: 'Bing ads', platform: 'bing' })).json(), retitled.json())
  t.equal((await api.get(`/v1/links/${link.uniq}`)).json().updatedDate, followed.updatedDate, 'repeating the stored values changes nothing')
  const moved = await api.put(`/v1/pixels/${created.id.toUpperCase()}`, { platform: 'adroll', value: 'AR-1', title: null })
  t.equal(moved.statusCode, 200, 'the id in any case')
  t.same(moved.json(), { ...created, platform: 'adroll', value: 'AR-1', title: null })
  t.same((await api.put(`/v1/pixels/${created.id}`, {})).json(), moved.json(), '{} changes nothing')
  t.same((await api.get(`/v1/links/${link.uniq}`)).json().pixels, [moved.json()])

  await pixel(api, { platform: 'ga', value: 'UA-2' })
  const clash = await api.put(`/v1/pixels/${created.id}`, { platform: 'ga', value: 'UA-2' })
  t.equal(clash.statusCode, 409)
  t.equal(clash.json().code, 'pixel_exists')
  const clashByValue = await api.put(`/v1/pixels/${created.id}`, { value: 'UA-2', platform: 'ga', title: 'x' })
  t.equal(clashByValue.statusCode, 409)
  t.same((await api.get('/v1/pixels')).json().pixels[0], moved.json(), 'a refused change changes nothing')

  for (const [body, path] of [[{ platform: 'nope' }, '/platform'], [{ value: '' }, '/value'], [{ title: 5 }, '/title']] as const) {
    const response = await api.put(`/v1/pixels/${created.id}`, body)
    t.equal(response.statusCode, 400, JSON.stringify(body))
    t.same(response.json().errors.map((e: Json) => e.path), [path])
  }
  const badId = await api.put('/v1/pixels/not-a-uuid', { title: 'x' })
  t.equal(badId.statusCode, 400)
  t.same(badId.json().errors, [{ path: '/uuid', message: 'must be a UUID' }])
  t.equal((await api.put(`/v1/pixels/${UNKNOWN}`, { title: 'x' })).statusCode, 404)
  const text = await app.inject({ method: 'PUT', url: `/v1/pixels/${created.id}`, headers: { 'api-authorization': token }, payload: 'x' })
  t.equal(text.statusCode, 415)
  const anonymous = await app.inject({
    method: 'PUT', url: `/v1/pixels/${created.id}`, headers: { 'content-type': 'application/json' }, payload: '{}',
  })
  t.equal(anonymous.statusCode, 401)
})

t.test('DELETE /v1/pixels/{uuid}: 204, and the links that used it lose it', async (t) => {
  const { api } = await workspace()
  const doomed = await pixel(api, { platform: 'twitter', value: 'T-1' })
  const kept = await pixel(api, { platform: 'quora', value: 'Q-1' })
  const both = await api.link({ url: 'https://example.com/', pixels: [doomed.id, kept.id] })
  const only = await api.link({ url: 'https://example.com/', pixels: [doomed.id], showGDPR: true })
  const none = await api.link({ url: 'https://example.com/' })
  await new Promise((resolve) => setTimeout(resolve, 5))

  t.equal((await app.inject({ method: 'DELETE', url: `/v1/pixels/${doomed.id}` })).statusCode, 401)
  const response = await api.delete(`/v1/pixels/${doomed.id}`)
  t.equal(response.statusCode, 204)
  t.equal(response.body, '')

  const bothAfter = (await api.get(`/v1/links/${both.uniq}`)).json()
  t.same(bothAfter.pixels, [kept], 'the other pixel stays')
  t.ok(bothAfter.updatedDate > both.updatedDate, 'a link that lost a pixel has a new updatedDate')
  const onlyAfter = (await api.get(`/v1/links/${only.uniq}`)).json()
  t.same(onlyAfter.pixels, [])
  t.equal(onlyAfter.showGDPR, true, 'the rest of the link is untouched')
  t.same((await api.get(`/v1/links/${none.uniq}`)).json(), none, 'links without it are untouched')
  t.same((await api.get('/v1/pixels')).json().pixels, [kept])

  t.equal((await api.delete(`/v1/pixels/${doomed.id}`)).statusCode, 404, 'twice: 404')
  t.equal((await api.delete('/v1/pixels/123')).statusCode, 400)
  t.equal((await api.delete(`/v1/pixels/${UNKNOWN}`)).statusCode, 404)

  // The platform and value are free again; a link may name them and gets a new pixel.
  const again = await api.link({ url: 'https://example.com/', pixels: [{ platform: 'twitter', value: 'T-1' }] })
  t.not(again.pixels[0].id, doomed.id)
})

t.test('a create or change of a pixel racing the delete of the pixel that held its platform and value: never a 500', async (t) => {
  // The delete locks the pixel and its links before removing it: until it commits, the key looks taken.
  const { api } = await workspace()
  const answers: number[] = []
  for (let round = 0; round < 10; round++) {
    const holder = await pixel(api, { platform: 'ga', value: `G-${round}` })
    await api.link({ url: 'https://example.com/', pixels: [holder.id] })
    const mover = await pixel(api, { platform: 'ga', value: `M-${round}` })
    const [deleted, moved, created] = await Promise.all([
      api.delete(`/v1/pixels/${holder.id}`),
      api.put(`/v1/pixels/${mover.id}`, { value: `G-${round}` }),
      api.post('/v1/pixels', { platform: 'ga', value: `G-${round}` }),
    ])
    t.equal(deleted.statusCode, 204)
    answers.push(moved.statusCode, created.statusCode)
    for (const response of [moved, created].filter((response) => response.statusCode === 409)) {
      t.equal(response.json().code, 'pixel_exists', `round ${round}`)
    }
    const holders = (await api.get('/v1/pixels')).json().pixels.filter((p: Json) => p.value === `G-${round}`)
    const won = [moved, created].filter((response) => response.statusCode < 300).length
    t.equal(holders.length, won ? 1 : 0, `round ${round}: one pixel holds the key once a write got it`)
  }
  t.same(answers.filter((status) => ![200, 201, 409].includes(status)), [], 'only 200, 201 or 409')
})

t.test(
  'a pixel being deleted frees its platform and value: a create or change of that key waits for the delete, then succeeds',
  { skip: process.env.DATABASE_URL ? false : 'a race of two transactions: PostgreSQL only' },
  async (t) => {
    const { api } = await workspace()
    const holder = await pixel(api, { platform: 'quora', value: 'Q-held' })
    const other = await pixel(api, { platform: 'quora', value: 'Q-other' })
    const { uniq } = await api.link({ url: 'https://example.com/', pixels: [holder.id] })
    // The delete locks the pixel, then waits for its link, locked here as a write of that link would hold it.
    const lock = await holdRowLock(prisma, Prisma.sql`SELECT 1 FROM "Link" WHERE "uniq" = ${uniq} FOR UPDATE`)
    const deleting = api.delete(`/v1/pixels/${holder.id}`)
    await waitForLockWaiters(prisma, 1)
    const writes = [api.post('/v1/pixels', { platform: 'quora', value: 'Q-held' }), api.put(`/v1/pixels/${other.id}`, { value: 'Q-held' })]
    await new Promise((resolve) => setTimeout(resolve, 300))
    await lock.release()
    t.equal((await deleting).statusCode, 204)
    const [created, changed] = await Promise.all(writes)
    const createdWon = created.statusCode === 201
    t.same([created.statusCode, changed.statusCode], createdWon ? [201, 409] : [409, 200], 'one write gets the freed key, the other is 409')
    const loser = createdWon ? changed : created
    const winnerId = createdWon ? created.json().id : other.id
    t.equal(loser.json().code, 'pixel_exists')
    t.match(loser.json().detail, winnerId, 'the conflict names the pixel that holds the key now, not the deleted one')
    const held = (await api.get('/v1/pixels')).json().pixels.filter((p: Json) => p.value === 'Q-held')
    t.same(held.map((p: Json) => p.id), [winnerId])
  },
)

t.test('a link naming a pixel by platform and value while another request renames that pixel gets such a pixel', async (t) => {
  // The link's insert finds the pixel there; the rename commits before the link locks it. The pixel is then
  // missing as if it had never been, and is created again.
  const { api } = await workspace()
  const statuses: number[] = []
  for (let round = 0; round < 30; round++) {
    const named = await pixel(api, { platform: 'ga', value: `A-${round}` })
    const [created, updated, renamed] = await Promise.all([
      api.post('/v1/links/create', { link: { url: 'https://example.com/', pixels: [{ platform: 'ga', value: `A-${round}` }] }, autofill: false }),
      api.put(`/v1/links/${(await api.link({ url: 'https://example.com/' })).uniq}`, { link: { pixels: [{ platform: 'ga', value: `A-${round}` }] }, autofill: false }),
      api.put(`/v1/pixels/${named.id}`, { value: `R-${round}` }),
    ])
    t.equal(renamed.statusCode, 200)
    statuses.push(created.statusCode, updated.statusCode)
    for (const response of [created, updated].filter((response) => response.statusCode < 300)) {
      t.match(response.json().pixels, [{ platform: 'ga', value: `A-${round}` }], `round ${round}`)
    }
  }
  t.same(statuses.filter((status) => status >= 300), [], 'every create and update went through')
})

t.test('an update that fails because its link was deleted meanwhile leaves none of its new pixels behind', async (t) => {
  const { api } = await workspace()
  const answers = new Set<number>()
  for (let round = 0; round < 30; round++) {
    const link = await api.link({ url: 'https://example.com/' })
    const [updated, deleted] = await Promise.all([
      api.put(`/v1/links/${link.uniq}`, { link: { pixels: [{ platform: 'facebook', value: `new-${round}` }] }, autofill: false }),
      api.delete(`/v1/links/${link.uniq}`),
    ])
    t.equal(deleted.statusCode, 204)
    answers.add(updated.statusCode)
    const stored = (await api.get('/v1/pixels')).json().pixels.filter((p: Json) => p.value === `new-${round}`)
    t.equal(stored.length, updated.statusCode === 200 ? 1 : 0, `round ${round}: update ${updated.statusCode}`)
  }
  t.ok([...answers].every((status) => status === 200 || status === 404), `only 200 or 404 (${[...answers]})`)
})

t.test('isolation: another workspace cannot see, change, delete or use the pixels', async (t) => {
  const a = await workspace()
  const b = await workspace()
  const mine = await pixel(a.api, { platform: 'linkedin', value: 'L-1', title: 'mine' })
  const link = await a.api.link({ url: 'https://example.com/', pixels: [mine.id] })

  t.same((await b.api.get('/v1/pixels')).json(), { pixels: [] })
  t.equal((await b.api.put(`/v1/pixels/${mine.id}`, { title: 'theirs' })).statusCode, 404)
  t.equal((await b.api.delete(`/v1/pixels/${mine.id}`)).statusCode, 404)
  const theirs = await b.api.post('/v1/pixels', { platform: 'linkedin', value: 'L-1' })
  t.equal(theirs.statusCode, 201, 'the same platform and value is another pixel in another workspace')
  t.not(theirs.json().id, mine.id)
  const byId = await b.api.post('/v1/links/create', { link: { url: 'https://example.com/', pixels: [mine.id] } })
  t.equal(byId.statusCode, 400, "a link cannot name another workspace's pixel")
  t.equal((await b.api.delete(`/v1/pixels/${theirs.json().id}`)).statusCode, 204)

  t.same((await a.api.get('/v1/pixels')).json().pixels, [mine], "A's pixel is untouched")
  t.same((await a.api.get(`/v1/links/${link.uniq}`)).json().pixels, [mine])
})
