/**
 * A client generated from the served OpenAPI document works: openapi-typescript turns GET /openapi.json into
 * TypeScript types, a small openapi-fetch program creates a link and updates it by both update paths with those
 * types, the TypeScript compiler accepts it under strict options (and rejects wrong calls, so the check can fail),
 * and the compiled program then runs against the real service over HTTP.
 */
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript'
import t from 'tap'
import ts from 'typescript'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'

const PROJECT_MODULES = fileURLToPath(new URL('../../node_modules', import.meta.url))

/** The client program: what an API user writes against the generated types. */
const CLIENT_PROGRAM = `
import createClient from 'openapi-fetch'
import type { components, paths } from './schema.js'

export type LinkRecord = components['schemas']['LinkRecord']
export type Problem = components['schemas']['Problem']

export interface Outcome {
  status: number
  contentType: string | null
  link?: LinkRecord
  problem?: Problem
}

function outcome(response: Response, link: LinkRecord | undefined, problem: Problem | undefined): Outcome {
  return { status: response.status, contentType: response.headers.get('content-type'), link, problem }
}

export async function createAndUpdate(
  baseUrl: string,
  token: string,
): Promise<{ created: Outcome; updated: Outcome; updatedByDomain: Outcome; missing: Outcome }> {
  const api = createClient<paths>({ baseUrl, headers: { 'Api-Authorization': token } })

  const created = await api.POST('/v1/links/create', {
    body: {
      link: {
        url: 'https://example.com/spring',
        id: 'spring',
        title: 'Spring',
        tags: ['season'],
        extraOptionsGeolocations: [{ url: 'https://example.de/fruehling', value: 'de' }],
        passwordProtect: null,
      },
      autofill: false,
    },
  })
  if (!created.data) throw new Error(\`create answered \${created.response.status} \${created.error?.code}\`)
  const uniq: number = created.data.uniq
  const domain: string = created.data.domain

  const updated = await api.PUT('/v1/links/{uniqId}', {
    params: { path: { uniqId: String(uniq) } },
    body: { link: { title: 'Spring sale', note: 'from the typed client' }, autofill: false },
  })
  const updatedByDomain = await api.PUT('/v1/links/by-domain/{domain}/{id}', {
    params: { path: { domain, id: 'SPRING' } },
    body: { link: { tags: 'season,sale', masking: true } },
  })
  // Clients fall back to create on this 404; its body is a typed Problem.
  const missing = await api.PUT('/v1/links/by-domain/{domain}/{id}', {
    params: { path: { domain, id: 'no-such-link' } },
    body: { link: {} },
  })

  return {
    created: outcome(created.response, created.data, created.error),
    updated: outcome(updated.response, updated.data, updated.error),
    updatedByDomain: outcome(updatedByDomain.response, updatedByDomain.data, updatedByDomain.error),
    missing: outcome(missing.response, missing.data, missing.error),
  }
}
`

/** Wrong uses of the generated client: every one must fail the type check. */
const WRONG_CALLS: Record<string, { code: string; message: RegExp }> = {
  'create without the required url': {
    code: `await api.POST('/v1/links/create', { body: { link: { id: 'no-url' } } })`,
    message: /Property 'url' is missing/,
  },
  'update with a title that is not a string': {
    code: `await api.PUT('/v1/links/{uniqId}', { params: { path: { uniqId: '1' } }, body: { link: { title: 5 } } })`,
    message: /Type 'number' is not assignable to type 'string'/,
  },
  'update by domain without the slug parameter': {
    code: `await api.PUT('/v1/links/by-domain/{domain}/{id}', { params: { path: { domain: 'go.brand.com' } }, body: { link: {} } })`,
    message: /Property 'id' is missing/,
  },
  'a method the path does not have': {
    code: `await api.PATCH('/v1/links/{uniqId}', { params: { path: { uniqId: '1' } } })`,
    message: /Argument of type '"\/v1\/links\/\{uniqId\}"' is not assignable/,
  },
  'reading a field the record does not have': {
    code: `const { data } = await api.POST('/v1/links/create', { body: { link: { url: 'https://example.com/' } } })
console.log(data?.password)`,
    message: /Property 'password' does not exist/,
  },
}

function wrongProgram(code: string): string {
  return `import createClient from 'openapi-fetch'
import type { paths } from './schema.js'
const api = createClient<paths>({ baseUrl: 'http://127.0.0.1:1' })
${code}
export {}
`
}

const COMPILER_OPTIONS: ts.CompilerOptions = {
  strict: true,
  noUncheckedIndexedAccess: true,
  noImplicitReturns: true,
  noUnusedLocals: false,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
  types: [],
  // Only the libraries' own declaration files are skipped; the generated schema.ts is checked like the client.
  skipLibCheck: true,
  noEmitOnError: true,
}

function describeDiagnostics(diagnostics: readonly ts.Diagnostic[]): string[] {
  return diagnostics.map((diagnostic) => {
    const where = diagnostic.file
      ? `${diagnostic.file.fileName.split('/').pop()}:${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line + 1}`
      : ''
    return `${where} TS${diagnostic.code}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`
  })
}

t.test('a client generated from GET /openapi.json type-checks and creates and updates a link', async (t) => {
  const { app, prisma } = await buildTestApp(t)
  const token = await createWorkspaceToken(prisma, { workspace: 'typed', defaultDomain: 'go.typed.test' })
  const served = await app.inject({ method: 'GET', url: '/openapi.json' })
  t.equal(served.statusCode, 200)

  // A directory of its own, outside the project, that sees the project's packages (openapi-fetch).
  const dir = await mkdtemp(join(tmpdir(), 'openapi-client-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  await symlink(PROJECT_MODULES, join(dir, 'node_modules'), 'dir')
  await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module' }))

  const types = astToString(await openapiTS(served.json<OpenAPI3>()))
  t.match(types, /"\/v1\/links\/create"/, 'the generated types name the create path')
  await writeFile(join(dir, 'schema.ts'), types)
  await writeFile(join(dir, 'client.ts'), CLIENT_PROGRAM)

  const host = ts.createCompilerHost(COMPILER_OPTIONS)
  const program = ts.createProgram({
    rootNames: [join(dir, 'client.ts'), join(dir, 'schema.ts')],
    options: { ...COMPILER_OPTIONS, outDir: join(dir, 'out'), rootDir: dir },
    host,
  })
  const diagnostics = ts.getPreEmitDiagnostics(program)
  t.same(describeDiagnostics(diagnostics), [], 'the client program type-checks under strict options')

  t.test('wrong calls fail the type check', async (t) => {
    // A program of its own beside the generated types, one file per wrong call so each is judged alone.
    const wrongFiles = Object.entries(WRONG_CALLS).map(([name, wrong], index) => ({
      name,
      ...wrong,
      path: join(dir, `wrong-${index + 1}.ts`),
    }))
    for (const file of wrongFiles) await writeFile(file.path, wrongProgram(file.code))
    const wrongProgramFiles = ts.createProgram({
      rootNames: wrongFiles.map((file) => file.path),
      options: { ...COMPILER_OPTIONS, noEmit: true },
      host,
      oldProgram: program,
    })
    const all = ts.getPreEmitDiagnostics(wrongProgramFiles)
    t.ok(
      all.every((diagnostic) => wrongFiles.some((file) => diagnostic.file?.fileName === file.path)),
      'every error is in a wrong call, none in the generated types',
    )
    for (const file of wrongFiles) {
      const found = describeDiagnostics(all.filter((diagnostic) => diagnostic.file?.fileName === file.path))
      t.ok(found.length > 0, `${file.name}: rejected`)
      t.ok(
        found.some((text) => file.message.test(text)),
        `${file.name}: the diagnostics say ${file.message}`,
        { found },
      )
    }
  })

  t.test('the compiled client runs against the service', async (t) => {
    const emitted = program.emit()
    t.same(describeDiagnostics(emitted.diagnostics), [])
    t.equal(emitted.emitSkipped, false)

    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    const compiled = (await import(pathToFileURL(join(dir, 'out', 'client.js')).href)) as {
      createAndUpdate(baseUrl: string, token: string): Promise<Record<string, Record<string, any>>>
    }
    const outcome = await compiled.createAndUpdate(`http://127.0.0.1:${port}`, token)

    t.match(outcome.created, {
      status: 201,
      contentType: /^application\/json/,
      link: {
        uniq: Number,
        id: 'spring',
        domain: 'go.typed.test',
        shortUrl: 'https://go.typed.test/spring',
        url: 'https://example.com/spring',
        title: 'Spring',
        tags: ['season'],
        extraOptionsGeolocations: [{ url: 'https://example.de/fruehling', value: 'DE' }],
        passwordProtect: null,
      },
    })
    const uniq = outcome.created.link.uniq
    t.match(outcome.updated, {
      status: 200,
      link: { uniq, id: 'spring', title: 'Spring sale', note: 'from the typed client', tags: ['season'], masking: false },
    })
    t.match(outcome.updatedByDomain, {
      status: 200,
      link: {
        uniq,
        id: 'spring',
        title: 'Spring sale',
        note: 'from the typed client',
        tags: ['season', 'sale'],
        masking: true,
        extraOptionsGeolocations: [{ value: 'DE' }],
      },
    })
    t.match(outcome.missing, {
      status: 404,
      contentType: /^application\/problem\+json/,
      problem: { status: 404, code: 'not_found' },
    })
  })
})
