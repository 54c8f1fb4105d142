/**
 * A client generated from the served OpenAPI document works: openapi-typescript turns GET /openapi.json into
 * TypeScript types, a small openapi-fetch program runs the scenario of generated-client-support.ts with those
 * types (ids passed as the records give them, errors read as the typed Problem, no casts), the TypeScript
 * compiler accepts it under strict options (and rejects wrong calls, so the check can fail), and the compiled
 * program then runs against the real service over HTTP.
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript'
import t from 'tap'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'
import {
  checkWrongCalls,
  clientDirectory,
  compileClient,
  runCompiledClient,
  SCENARIO_DOMAIN,
  type WrongCall,
} from './generated-client-support.js'

/** The client program: what an API user writes against the generated types. */
const CLIENT_PROGRAM = `
import createClient from 'openapi-fetch'
import type { components, paths } from './schema.js'

type LinkRecord = components['schemas']['LinkRecord']
type LinkInput = components['schemas']['LinkInput']
type LinkPatch = components['schemas']['LinkPatch']
type Problem = components['schemas']['Problem']

function described(response: Response, problem: Problem | undefined) {
  return { status: response.status, code: problem?.code ?? 'none', contentType: response.headers.get('content-type') }
}

export async function run(baseUrl: string, token: string) {
  const api = createClient<paths>({ baseUrl, headers: { 'Api-Authorization': token } })
  const must = <T>(data: T | undefined, response: Response, what: string): T => {
    if (data === undefined) throw new Error(\`\${what} answered \${response.status}\`)
    return data
  }

  const folderAnswer = await api.POST('/v1/folders', { body: { name: 'Spring' } })
  const folder = must(folderAnswer.data, folderAnswer.response, 'createFolder')

  const input: LinkInput = {
    url: 'https://example.com/spring',
    id: 'spring',
    tags: ['season', 'batch'],
    folderId: folder.id,
    pixels: [{ platform: 'facebook', value: '1234567890' }],
    extraOptionsGeolocations: [{ url: 'https://example.de/fruehling', value: 'de' }],
    linkExpiration: { enable: true, end: '2099-01-31T23:59:59.000Z', url: 'https://example.com/over', timezone: 1 },
    passwordProtect: { enable: true, password: 'open sesame' },
  }
  const createdAnswer = await api.POST('/v1/links/create', { body: { link: input, autofill: false } })
  const created: LinkRecord = must(createdAnswer.data, createdAnswer.response, 'createLink')

  const readAnswer = await api.GET('/v1/links/{uniqId}', { params: { path: { uniqId: created.uniq } } })
  const read = must(readAnswer.data, readAnswer.response, 'getLink')

  const patch: LinkPatch = { title: 'Spring sale', note: 'from the typed client' }
  const updatedAnswer = await api.PUT('/v1/links/{uniqId}', { params: { path: { uniqId: read.uniq } }, body: { link: patch, autofill: false } })
  const updated = must(updatedAnswer.data, updatedAnswer.response, 'updateLink')
  const byDomainAnswer = await api.PUT('/v1/links/by-domain/{domain}/{id}', {
    params: { path: { domain: updated.domain, id: 'SPRING' } },
    body: { link: { tags: 'season,batch,sale', masking: true }, autofill: false },
  })
  const updatedByDomain = must(byDomainAnswer.data, byDomainAnswer.response, 'updateLinkByDomain')

  const batch: number[] = []
  for (const id of ['batch-1', 'batch-2']) {
    const answer = await api.POST('/v1/links/create', { body: { link: { url: 'https://example.com/' + id, id, tags: 'batch' }, autofill: false } })
    batch.push(must(answer.data, answer.response, 'createLink').uniq)
  }
  const listed = { pages: 0, uniqs: [] as number[] }
  let cursor: string | undefined
  do {
    const page = await api.GET('/v1/links', { params: { query: { tag: ['batch'], limit: 2, cursor } } })
    const data = must(page.data, page.response, 'listLinks')
    listed.pages++
    listed.uniqs.push(...data.links.map((link) => link.uniq))
    cursor = data.nextCursor ?? undefined
  } while (cursor !== undefined)

  const missingAnswer = await api.GET('/v1/links/{uniqId}', { params: { path: { uniqId: 2147483647 } } })
  const missing = described(missingAnswer.response, missingAnswer.error)
  const takenAnswer = await api.POST('/v1/links/create', { body: { link: { url: 'https://example.com/again', id: 'spring' } } })
  const taken = described(takenAnswer.response, takenAnswer.error)

  const deletedAnswer = await api.DELETE('/v1/links/{uniqId}', { params: { path: { uniqId: created.uniq } } })
  const afterDelete = await api.GET('/v1/links/{uniqId}', { params: { path: { uniqId: created.uniq } } })

  return {
    folderId: folder.id, created, read, updated, updatedByDomain, listed, batch, missing, taken,
    deleted: deletedAnswer.response.status, afterDelete: afterDelete.response.status,
  }
}
`

/** Wrong uses of the generated client: every one must fail the type check. */
const WRONG_CALLS: Record<string, WrongCall> = {
  'create without the required url': {
    code: `await api.POST('/v1/links/create', { body: { link: { id: 'no-url' } } })`,
    message: /Property 'url' is missing/,
  },
  'update with a title that is not a string': {
    code: `await api.PUT('/v1/links/{uniqId}', { params: { path: { uniqId: 1 } }, body: { link: { title: 5 } } })`,
    message: /Type 'number' is not assignable to type 'string'/,
  },
  'update by domain without the slug parameter': {
    code: `await api.PUT('/v1/links/by-domain/{domain}/{id}', { params: { path: { domain: 'go.brand.com' } }, body: { link: {} } })`,
    message: /Property 'id' is missing/,
  },
  'a method the path does not have': {
    code: `await api.PATCH('/v1/links/{uniqId}', { params: { path: { uniqId: 1 } } })`,
    message: /Argument of type '"\/v1\/links\/\{uniqId\}"' is not assignable/,
  },
  'reading a field the record does not have': {
    code: `const { data } = await api.POST('/v1/links/create', { body: { link: { url: 'https://example.com/' } } })
console.log(data?.password)`,
    message: /Property 'password' does not exist/,
  },
  'a uniqId given as text': {
    code: `await api.GET('/v1/links/{uniqId}', { params: { path: { uniqId: '42' } } })`,
    message: /Type 'string' is not assignable to type 'number'/,
  },
  'a pixel platform that does not exist': {
    code: `await api.POST('/v1/links/create', { body: { link: { url: 'https://example.com/', pixels: [{ platform: 'myspace', value: 'x' }] } } })`,
    message: /'"myspace"' is not assignable/,
  },
}

const wrongProgram = (code: string) => `import createClient from 'openapi-fetch'
import type { paths } from './schema.js'
const api = createClient<paths>({ baseUrl: 'http://127.0.0.1:1' })
${code}
export {}
`

t.test('a client generated by openapi-typescript from GET /openapi.json type-checks and runs the scenario', async (t) => {
  const { app, prisma } = await buildTestApp(t)
  const token = await createWorkspaceToken(prisma, { workspace: 'typed', defaultDomain: SCENARIO_DOMAIN })
  const served = await app.inject({ method: 'GET', url: '/openapi.json' })
  t.equal(served.statusCode, 200)

  const dir = await clientDirectory(t, 'openapi-fetch-client-')
  const types = astToString(await openapiTS(served.json<OpenAPI3>()))
  t.match(types, /"\/v1\/links\/create"/, 'the generated types name the create path')
  t.match(types, /LinkInput: \{/, 'the link input is a named component')
  t.match(types, /uniqId: number/, 'path ids are numbers, as in the records')
  await writeFile(join(dir, 'schema.ts'), types)
  await writeFile(join(dir, 'client.ts'), CLIENT_PROGRAM)

  const compiled = compileClient(dir, [join(dir, 'client.ts'), join(dir, 'schema.ts')])
  t.same(compiled.diagnostics, [], 'the client program type-checks under strict options')

  t.test('wrong calls fail the type check', (t) => checkWrongCalls(t, dir, compiled, WRONG_CALLS, wrongProgram))

  t.test('the compiled client runs against the service', (t) => runCompiledClient(t, compiled, dir, app, token))
})
