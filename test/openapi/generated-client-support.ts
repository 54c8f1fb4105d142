/**
 * What the generated-client tests share (generated-client.test.ts: openapi-typescript + openapi-fetch;
 * hey-api-client.test.ts: @hey-api/openapi-ts with its fetch client): a directory for the generated code, the
 * strict compile, the check that wrong programs are refused, and what the client program must have seen
 * when it ran against the service. Each client program runs the same scenario and answers an Outcome.
 */
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import ts from 'typescript'

const PROJECT_MODULES = fileURLToPath(new URL('../../node_modules', import.meta.url))

/** What the programs are compiled with: `tsc --strict` and more. No cast or String() in the programs either. */
export const COMPILER_OPTIONS: ts.CompilerOptions = {
  strict: true,
  noUncheckedIndexedAccess: true,
  noImplicitReturns: true,
  noUnusedLocals: false,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2022.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
  types: [],
  // Only the libraries' own declaration files are skipped; the generated code is checked like the program.
  skipLibCheck: true,
  noEmitOnError: true,
}

/** A directory of its own, outside the project, that sees the project's packages (the client libraries). */
export async function clientDirectory(t: Test, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  await symlink(PROJECT_MODULES, join(dir, 'node_modules'), 'dir')
  await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module' }))
  return dir
}

export function describeDiagnostics(diagnostics: readonly ts.Diagnostic[]): string[] {
  return diagnostics.map((diagnostic) => {
    const where = diagnostic.file
      ? `${diagnostic.file.fileName.split('/').pop()}:${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line + 1}`
      : ''
    return `${where} TS${diagnostic.code}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`
  })
}

/** The client program and the generated code, compiled to `out/` when the type check passes. */
export function compileClient(dir: string, rootNames: string[]) {
  const host = ts.createCompilerHost(COMPILER_OPTIONS)
  const program = ts.createProgram({
    rootNames,
    options: { ...COMPILER_OPTIONS, outDir: join(dir, 'out'), rootDir: dir },
    host,
  })
  return { host, program, diagnostics: describeDiagnostics(ts.getPreEmitDiagnostics(program)) }
}

export interface WrongCall {
  code: string
  message: RegExp
}

/** Every wrong call, one file each beside the generated code, must fail the type check with `message`. */
export async function checkWrongCalls(
  t: Test,
  dir: string,
  compiled: ReturnType<typeof compileClient>,
  wrongCalls: Record<string, WrongCall>,
  program: (code: string) => string,
): Promise<void> {
  const wrongFiles = Object.entries(wrongCalls).map(([name, wrong], index) => ({
    name,
    ...wrong,
    path: join(dir, `wrong-${index + 1}.ts`),
  }))
  for (const file of wrongFiles) await writeFile(file.path, program(file.code))
  const wrongProgram = ts.createProgram({
    rootNames: wrongFiles.map((file) => file.path),
    options: { ...COMPILER_OPTIONS, noEmit: true },
    host: compiled.host,
    oldProgram: compiled.program,
  })
  const all = ts.getPreEmitDiagnostics(wrongProgram)
  t.ok(
    all.every((diagnostic) => wrongFiles.some((file) => diagnostic.file?.fileName === file.path)),
    'every error is in a wrong call, none in the generated code',
    { found: describeDiagnostics(all.filter((diagnostic) => !wrongFiles.some((file) => diagnostic.file?.fileName === file.path))) },
  )
  for (const file of wrongFiles) {
    const found = describeDiagnostics(all.filter((diagnostic) => diagnostic.file?.fileName === file.path))
    t.ok(found.length > 0, `${file.name}: rejected`)
    t.ok(found.some((text) => file.message.test(text)), `${file.name}: the diagnostics say ${file.message}`, { found })
  }
}

/**
 * The scenario both client programs run, step by step, against a workspace whose default domain is
 * `SCENARIO_DOMAIN`:
 * 1. create a folder; create the link `spring` in it with tags, a pixel, an expiration and a password;
 * 2. read it back by its uniq (a number, passed as the record gives it);
 * 3. update it by uniq, then by domain and slug;
 * 4. create two more links tagged `batch` and list that tag two links a page, following nextCursor;
 * 5. read a link that does not exist (404) and create `spring` again (409), both read as the typed Problem;
 * 6. delete `spring`, after which reading it is a 404.
 */
export const SCENARIO_DOMAIN = 'go.typed.test'

/** What a client program answers: plain data, so the test can check it. */
export interface Outcome {
  folderId: number
  created: Record<string, unknown> & { uniq: number }
  read: Record<string, unknown>
  updated: Record<string, unknown>
  updatedByDomain: Record<string, unknown>
  listed: { pages: number; uniqs: number[] }
  batch: number[]
  missing: { status: number; code: string; contentType: string | null }
  taken: { status: number; code: string; contentType: string | null }
  deleted: number
  afterDelete: number
}

export function checkOutcome(t: Test, outcome: Outcome): void {
  const { uniq } = outcome.created
  t.match(outcome.created, {
    uniq: Number,
    id: 'spring',
    domain: SCENARIO_DOMAIN,
    shortUrl: `https://${SCENARIO_DOMAIN}/spring`,
    url: 'https://example.com/spring',
    tags: ['season', 'batch'],
    folderId: outcome.folderId,
    pixels: [{ platform: 'facebook', value: '1234567890', id: String }],
    linkExpiration: { enable: true, end: '2099-01-31T23:59:59.000Z', url: 'https://example.com/over', timezone: 1 },
    passwordProtect: { enable: true },
    extraOptionsGeolocations: [{ url: 'https://example.de/fruehling', value: 'DE' }],
  }, 'create: the stored link')
  t.notOk('password' in (outcome.created.passwordProtect as object), 'the password is not returned')
  t.same(outcome.read, outcome.created, 'read by uniq: the record create answered')
  t.match(outcome.updated, { uniq, title: 'Spring sale', note: 'from the typed client', tags: ['season', 'batch'] }, 'update by uniq')
  t.match(
    outcome.updatedByDomain,
    { uniq, id: 'spring', title: 'Spring sale', note: 'from the typed client', tags: ['season', 'batch', 'sale'], masking: true },
    'update by domain and slug (any case)',
  )
  t.equal(outcome.listed.pages, 2, 'three links of the tag, two a page: two pages')
  t.same(outcome.listed.uniqs, [...outcome.batch, uniq].sort((a, b) => b - a), 'every link of the tag once, newest first')
  t.match(outcome.missing, { status: 404, code: 'not_found', contentType: /^application\/problem\+json/ }, '404: a typed Problem')
  t.match(outcome.taken, { status: 409, code: 'slug_taken', contentType: /^application\/problem\+json/ }, '409: a typed Problem')
  t.equal(outcome.deleted, 204, 'delete: 204')
  t.equal(outcome.afterDelete, 404, 'then the link is gone')
}

/**
 * Emits the compiled client program (`dir/client.ts`, to `dir/out`), has it run the scenario against `app` over
 * real HTTP with `token`, and checks what it saw.
 */
export async function runCompiledClient(
  t: Test,
  compiled: ReturnType<typeof compileClient>,
  dir: string,
  app: FastifyInstance,
  token: string,
): Promise<void> {
  const emitted = compiled.program.emit()
  t.same(describeDiagnostics(emitted.diagnostics), [])
  t.equal(emitted.emitSkipped, false)

  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const program = (await import(pathToFileURL(join(dir, 'out', 'client.js')).href)) as {
    run(baseUrl: string, token: string): Promise<Outcome>
  }
  checkOutcome(t, await program.run(`http://127.0.0.1:${port}`, token))
}
