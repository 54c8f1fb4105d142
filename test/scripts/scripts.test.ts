/**
 * Issue 5, scripts: list (without content), get, create and update (at most 64 KiB of UTF-8 content, in bodies
 * up to 512 KiB), delete (the id leaves every link's linkScripts), every failure code, and isolation.
 */
import t from 'tap'
import { apiClient } from '../support/api-client.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'
import { createScript as createScriptFromCli } from '../../src/workspaces/workspace-repository.js'

type Json = Record<string, any>

const { app, prisma } = await buildTestApp(t)
const KIB = 1024

let workspaces = 0
async function workspace() {
  const name = `ws${++workspaces}`
  const token = await createWorkspaceToken(prisma, { workspace: name, defaultDomain: `go.${name}.test` })
  return { name, token, api: apiClient(app, token) }
}

async function script(api: ReturnType<typeof apiClient>, body: Json): Promise<Json> {
  const response = await api.post('/v1/scripts', body)
  if (response.statusCode !== 201) throw new Error(response.body)
  return response.json()
}

t.test('POST /v1/scripts stores a script; GET lists them without content; GET one has it', async (t) => {
  const { api } = await workspace()
  const content = '<script>console.log("héllo")</script>'
  const response = await api.post('/v1/scripts', { name: ' Chat widget ', content })
  t.equal(response.statusCode, 201)
  const created = response.json()
  t.match(created, { id: Number, name: 'Chat widget', size: Buffer.byteLength(content), content })
  t.equal(created.size, content.length + 1, 'size counts bytes of UTF-8, not characters')
  t.match(created.createdAt, /Z$/)
  t.equal(created.updatedAt, created.createdAt)
  const second = await script(api, { name: 'Analytics', content: 'x' })

  const list = await api.get('/v1/scripts')
  t.equal(list.statusCode, 200)
  const summaryOf = ({ content: _content, ...summary }: Json) => summary
  t.same(list.json(), { scripts: [summaryOf(created), summaryOf(second)] })

  const one = await api.get(`/v1/scripts/${created.id}`)
  t.equal(one.statusCode, 200)
  t.same(one.json(), created)
  t.equal((await api.get('/v1/scripts/999999')).statusCode, 404)
  t.match(await api.get('/v1/scripts/99999999999'), { statusCode: 400, body: /"path":"\/id"/ }, "beyond the column's range: a 400 naming the field (issue 12: path ids are integers up to 2147483647)")
  const badId = await api.get('/v1/scripts/abc')
  t.equal(badId.statusCode, 400)
  t.same(badId.json().errors.map((e: Json) => e.path), ['/id'])
  t.equal((await app.inject({ method: 'GET', url: '/v1/scripts' })).statusCode, 401)
  t.equal((await app.inject({ method: 'GET', url: `/v1/scripts/${created.id}` })).statusCode, 401)

  const link = await api.link({ url: 'https://example.com/', linkScripts: [created.id, second.id], linkScriptEnable: true })
  t.same(link.linkScripts, [created.id, second.id], 'links attach them by id')
})

t.test('content is limited to 64 KiB of UTF-8, in bodies of up to 512 KiB', async (t) => {
  const { api } = await workspace()
  const exactly = await api.post('/v1/scripts', { name: 'max', content: 'x'.repeat(64 * KIB) })
  t.equal(exactly.statusCode, 201, '65536 bytes')
  t.equal(exactly.json().size, 64 * KIB)

  const escaped = '\u0001'.repeat(64 * KIB)
  t.ok(JSON.stringify({ content: escaped }).length > 300 * KIB, 'this body is far over 64 KiB as JSON')
  t.equal((await api.post('/v1/scripts', { name: 'escaped', content: escaped })).statusCode, 201, 'yet its content is 64 KiB')

  const over = await api.post('/v1/scripts', { name: 'over', content: 'x'.repeat(64 * KIB + 1) })
  t.equal(over.statusCode, 400)
  t.same(over.json().errors, [{ path: '/content', message: 'must be at most 65536 bytes of UTF-8 (has 65537)' }])
  // 30,000 characters of three bytes each: under 64 Ki characters, over 64 KiB.
  const wide = await api.post('/v1/scripts', { name: 'wide', content: '€'.repeat(30_000) })
  t.equal(wide.statusCode, 400)
  t.same(wide.json().errors.map((e: Json) => e.path), ['/content'])

  const huge = await api.post('/v1/scripts', { name: 'huge', content: 'x'.repeat(600 * KIB) })
  t.equal(huge.statusCode, 413)
  t.equal(huge.json().code, 'payload_too_large')
  t.match(huge.json().detail, /524288 bytes/)
  t.equal(await prisma.script.count({ where: { name: { in: ['over', 'wide', 'huge'] } } }), 0)

  // Other routes keep the service's 64 KiB body limit.
  const folder = await api.post('/v1/folders', { name: 'x'.repeat(70 * KIB) })
  t.equal(folder.statusCode, 413)
  t.match(folder.json().detail, /65536 bytes/)
})

t.test('POST /v1/scripts refuses bad bodies, non-JSON and missing tokens', async (t) => {
  const { api, token } = await workspace()
  const cases: [Json, string[]][] = [
    [{}, ['/name', '/content']],
    [{ name: 'n' }, ['/content']],
    [{ name: 'n', content: '' }, ['/content']],
    [{ name: 'n', content: ' \n\t\u00a0' }, ['/content']],
    [{ name: 'n', content: 5 }, ['/content']],
    [{ name: '  ', content: 'x' }, ['/name']],
    [{ name: 'x'.repeat(101), content: 'x' }, ['/name']],
    [{ name: 'two\nlines', content: 'x' }, ['/name']],
    [{ name: 'esc\u001b[31m', content: 'x' }, ['/name']],
    [{ name: 'n', content: 'nul\u0000here' }, ['/content']],
    [{ name: ' ', content: 'x'.repeat(64 * KIB + 1) }, ['/name', '/content']],
  ]
  for (const [body, paths] of cases) {
    const response = await api.post('/v1/scripts', body)
    t.equal(response.statusCode, 400, JSON.stringify(body).slice(0, 60))
    t.same(response.json().errors.map((e: Json) => e.path), paths)
  }
  const text = await app.inject({ method: 'POST', url: '/v1/scripts', headers: { 'api-authorization': token }, payload: 'x' })
  t.equal(text.statusCode, 415)
  const anonymous = await app.inject({
    method: 'POST', url: '/v1/scripts', headers: { 'content-type': 'application/json' }, payload: '{"name":"a","content":"b"}',
  })
  t.equal(anonymous.statusCode, 401)
  t.equal(await prisma.script.count({ where: { name: { in: ['n', 'a'] } } }), 0, 'nothing was stored')
})

t.test('PUT /v1/scripts/{id} changes the fields present', async (t) => {
  const { api, token } = await workspace()
  const created = await script(api, { name: 'Widget', content: 'old' })
  await new Promise((resolve) => setTimeout(resolve, 5))
  const renamed = await api.put(`/v1/scripts/${created.id}`, { name: 'Widget v2' })
  t.equal(renamed.statusCode, 200)
  t.match(renamed.json(), { id: created.id, name: 'Widget v2', content: 'old', createdAt: created.createdAt })
  t.ok(renamed.json().updatedAt > created.updatedAt)
  const rewritten = await api.put(`/v1/scripts/${created.id}`, { content: '<b>new</b>' })
  t.match(rewritten.json(), { name: 'Widget v2', content: '<b>new</b>', size: 10 })
  t.same((await api.put(`/v1/scripts/${created.id}`, {})).json(), rewritten.json(), '{} changes nothing')

  const over = await api.put(`/v1/scripts/${created.id}`, { content: 'x'.repeat(64 * KIB + 1), name: 'kept?' })
  t.equal(over.statusCode, 400)
  t.same((await api.get(`/v1/scripts/${created.id}`)).json(), rewritten.json(), 'a refused change changes nothing')
  t.equal((await api.put(`/v1/scripts/${created.id}`, { name: '' })).statusCode, 400)
  t.equal((await api.put('/v1/scripts/abc', { name: 'x' })).statusCode, 400)
  t.equal((await api.put('/v1/scripts/999999', { name: 'x' })).statusCode, 404)
  t.equal((await api.put('/v1/scripts/999999', {})).statusCode, 404)
  const text = await app.inject({ method: 'PUT', url: `/v1/scripts/${created.id}`, headers: { 'api-authorization': token }, payload: 'x' })
  t.equal(text.statusCode, 415)
  const anonymous = await app.inject({
    method: 'PUT', url: `/v1/scripts/${created.id}`, headers: { 'content-type': 'application/json' }, payload: '{}',
  })
  t.equal(anonymous.statusCode, 401)
})

t.test('DELETE /v1/scripts/{id}: 204, and the id leaves every link of the workspace', async (t) => {
  const { api } = await workspace()
  const doomed = await script(api, { name: 'doomed', content: 'x' })
  const kept = await script(api, { name: 'kept', content: 'y' })
  const both = await api.link({ url: 'https://example.com/', linkScripts: [kept.id, doomed.id], linkScriptEnable: true })
  const only = await api.link({ url: 'https://example.com/', linkScripts: [doomed.id], linkScriptEnable: true })
  const other = await api.link({ url: 'https://example.com/', linkScripts: [kept.id] })
  const none = await api.link({ url: 'https://example.com/' })
  await new Promise((resolve) => setTimeout(resolve, 5))

  t.equal((await app.inject({ method: 'DELETE', url: `/v1/scripts/${doomed.id}` })).statusCode, 401)
  const response = await api.delete(`/v1/scripts/${doomed.id}`)
  t.equal(response.statusCode, 204)
  t.equal(response.body, '')

  const bothAfter = (await api.get(`/v1/links/${both.uniq}`)).json()
  t.same(bothAfter.linkScripts, [kept.id], 'the other script stays, in its place')
  t.ok(bothAfter.updatedDate > both.updatedDate, 'a link that lost a script has a new updatedDate')
  t.equal(bothAfter.linkScriptEnable, true)
  const onlyAfter = (await api.get(`/v1/links/${only.uniq}`)).json()
  t.same(onlyAfter.linkScripts, [], 'a link left with none keeps an empty list')
  t.same((await api.get(`/v1/links/${other.uniq}`)).json(), other, 'links without it are untouched')
  t.same((await api.get(`/v1/links/${none.uniq}`)).json(), none)
  t.equal((await api.get(`/v1/scripts/${doomed.id}`)).statusCode, 404)
  t.same((await api.get('/v1/scripts')).json().scripts.map((s: Json) => s.id), [kept.id])
  // The link can be updated as it stands: it names no missing script.
  t.equal((await api.put(`/v1/links/${both.uniq}`, { link: { linkScripts: bothAfter.linkScripts } })).statusCode, 200)

  t.equal((await api.delete(`/v1/scripts/${doomed.id}`)).statusCode, 404, 'twice: 404')
  t.equal((await api.delete('/v1/scripts/abc')).statusCode, 400)
  t.match(await api.delete('/v1/scripts/99999999999'), { statusCode: 400, body: /"path":"\/id"/ }, "beyond the column's range: a 400 naming the field (issue 12: path ids are integers up to 2147483647)")
})

t.test('isolation: another workspace cannot see, change, delete or attach the scripts', async (t) => {
  const a = await workspace()
  const b = await workspace()
  const mine = await script(a.api, { name: 'mine', content: 'secret' })
  const link = await a.api.link({ url: 'https://example.com/', linkScripts: [mine.id] })

  t.same((await b.api.get('/v1/scripts')).json(), { scripts: [] })
  t.equal((await b.api.get(`/v1/scripts/${mine.id}`)).statusCode, 404)
  t.equal((await b.api.put(`/v1/scripts/${mine.id}`, { content: 'pwned' })).statusCode, 404)
  t.equal((await b.api.delete(`/v1/scripts/${mine.id}`)).statusCode, 404)
  const attach = await b.api.post('/v1/links/create', { link: { url: 'https://example.com/', linkScripts: [mine.id] } })
  t.equal(attach.statusCode, 400)
  // Even a link of A naming B's script (as no request can make it) is left alone: B's delete stays in B.
  const theirs = await script(b.api, { name: 'theirs', content: 'x' })
  await prisma.link.update({ where: { uniq: link.uniq }, data: { linkScripts: [mine.id, theirs.id] } })
  t.equal((await b.api.delete(`/v1/scripts/${theirs.id}`)).statusCode, 204)
  t.same((await a.api.get(`/v1/links/${link.uniq}`)).json().linkScripts, [mine.id, theirs.id])

  t.same((await a.api.get(`/v1/scripts/${mine.id}`)).json(), mine, "A's script is untouched")
})

t.test('scripts made by the command line are listed, read and deleted by the API', async (t) => {
  const { api, name } = await workspace()
  const fromCli = await createScriptFromCli(prisma, { workspace: name, name: 'From CLI', content: '<i>cli</i>' })
  t.same((await api.get('/v1/scripts')).json().scripts.map((s: Json) => [s.id, s.name, s.size]), [[fromCli.id, 'From CLI', 10]])
  t.equal((await api.get(`/v1/scripts/${fromCli.id}`)).json().content, '<i>cli</i>')
  t.equal((await api.delete(`/v1/scripts/${fromCli.id}`)).statusCode, 204)
})
