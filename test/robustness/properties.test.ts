/**
 * Issue 9, property-based: over every route that takes a body, path parameters or a query, random and
 * mutated requests (valid bodies with fields set to wrong types, strings with NUL or lone surrogates, deep
 * nesting, extreme numbers, huge arrays, unknown and prototype keys; random query strings and ids; random
 * bytes) never get a 500, never change stored data when they get an error, and every 400 names its fields by
 * JSON pointer (at most 50 of them), except a body that is not JSON at all (invalid_json); a body that is JSON
 * but no object is named by the pointer "" (the whole body).
 *
 * Seeded and bounded for CI; fast-check prints the seed and the shrunk counterexample of a failure.
 * A longer run by hand: FC_RUNS=2000 npx tap test/robustness/properties.test.ts (FC_SEED picks another seed).
 */
import assert from 'node:assert/strict'
import fc from 'fast-check'
import type { LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { PLATFORMS } from '../../schemas/link.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { errorLog } from '../support/error-log.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'

type Json = Record<string, any>

const RUNS = Number(process.env.FC_RUNS ?? 30)
const SEED = Number(process.env.FC_SEED ?? 20261123)
const settings = { numRuns: RUNS, seed: SEED }

const log = errorLog()
const { app, prisma } = await buildTestApp(t, { logger: log.logger })
const DOMAIN = 'go.props.test'
const token = await createWorkspaceToken(prisma, { workspace: 'props', defaultDomain: DOMAIN })
// Long runs by hand make thousands of writes: the quota is not what is under test.
await setLimits(prisma, { workspace: 'props', hour: 2_000_000_000, day: 2_000_000_000 })

async function post(url: string, body: unknown) {
  const response = await request('POST', url, JSON.stringify(body))
  if (response.statusCode !== 201) throw new Error(response.body)
  return response.json()
}

function request(method: string, url: string, payload?: string | Buffer, headers: Record<string, string> = {}) {
  return app.inject({
    method: method as 'GET',
    url,
    headers: { 'api-authorization': token, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(payload !== undefined ? { payload } : {}),
  })
}

const folder = await post('/v1/folders', { name: 'Props' })
const pixel = await post('/v1/pixels', { platform: 'ga', value: 'UA-PROPS' })
const script = await post('/v1/scripts', { name: 'Props', content: 'props' })
const link = await post('/v1/links/create', { link: { url: 'https://example.com/', id: 'target' }, autofill: false })

/** One value for everything a request could have changed: every row a body, a parameter or a query can reach. */
async function fingerprint(): Promise<string> {
  const tables = ['Link', 'LinkPixel', 'Folder', 'Pixel', 'Script']
  const parts = tables.map((table) => `coalesce((SELECT string_agg(t::text, '|' ORDER BY t::text) FROM "${table}" t), '')`)
  const [row] = await prisma.$queryRawUnsafe<{ digest: string }[]>(`SELECT md5(${parts.join(" || '#' || ")}) AS digest`)
  return row.digest
}

/** The properties every answer has; `before` is the fingerprint taken before the request. */
async function assertSound(response: LightMyRequestResponse, before: string, what: string): Promise<void> {
  assert.ok(response.statusCode < 500, `${what}: answered ${response.statusCode} ${response.body.slice(0, 500)}`)
  if (response.statusCode < 400) return
  assert.equal(await fingerprint(), before, `${what}: an error (${response.statusCode}) changed stored data`)
  if (response.statusCode !== 400 || !/^application\/(problem\+)?json/.test(String(response.headers['content-type']))) return
  const problem = response.json()
  if (problem.code === 'invalid_json') return
  assert.ok(Array.isArray(problem.errors) && problem.errors.length >= 1, `${what}: a 400 names no field: ${response.body.slice(0, 500)}`)
  assert.ok(problem.errors.length <= 50, `${what}: ${problem.errors.length} errors listed`)
  for (const error of problem.errors) {
    // The pointer "" is the body itself, named only when it is not an object at all.
    const named = error.path.startsWith('/') || (error.path === '' && error.message === 'must be an object')
    assert.ok(named, `${what}: ${JSON.stringify(error)} has no JSON pointer`)
    assert.ok(typeof error.message === 'string' && error.message.length > 0)
  }
}

async function sendAndCheck(method: string, url: string, payload?: string | Buffer, headers?: Record<string, string>) {
  const before = await fingerprint()
  const response = await request(method, url, payload, headers)
  await assertSound(response, before, `${method} ${url.slice(0, 200)} ${String(payload ?? '').slice(0, 300)}`)
  return response
}

// --- Values -------------------------------------------------------------------------------------------------

/** Any UTF-16 code units, so NUL and lone surrogates too. */
const anyUnits = fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 12 }).map((units) => String.fromCharCode(...units))

const nastyString = fc.oneof(
  fc.constantFrom(
    '', ' ', '\u0000', 'a\u0000b', '\ud800', 'x\udc00', '\udbff\ud800', '😀'.repeat(70), 'x'.repeat(5000), '__proto__',
    '0x10', '1e1', ' 12', '+5', '012', '-1', '9'.repeat(40), 'javascript:alert(1)', 'https://user:pass@example.com/',
    'https://go.props.test/loop', 'urn:uuid:6f1c2a9e-4a39-4c55-9d3e-2b7c8f0a1d22', '0000-01-01T00:00:00Z',
    '9999-12-31T23:59:59.999Z', '+275760-09-13T00:00:00Z', 'DE', 'xx', 'facebook', 'https://example.com/ok', 'a,b,,c',
  ),
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 30 }),
  anyUnits,
)

const extremeNumber = fc.oneof(
  fc.constantFrom(0, -0, 1, -1, 0.5, 100, 101, 2 ** 31, 2 ** 31 - 1, 2 ** 53 + 2, -(2 ** 53), 1e308, -1e308, 5e-324),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
)

const nested = fc.integer({ min: 20, max: 4000 }).map((levels) => JSON.parse(`${'['.repeat(levels)}1${']'.repeat(levels)}`))

const hugeArray = fc
  .tuple(fc.integer({ min: 51, max: 20_000 }), fc.constantFrom<unknown>(1, 'x', {}, [], null, { platform: 'ga' }, { url: 1, value: true }))
  // Copies, not one shared element: a later mutation of one must not repeat itself 20,000 times.
  .map(([length, item]) => Array.from({ length }, () => structuredClone(item)))

/** Objects holding a member a plain assignment could not make: "__proto__" as data, "constructor". */
const prototypeObject = fc.constantFrom(
  () => JSON.parse('{"__proto__":{"polluted":true}}'),
  () => JSON.parse('{"constructor":{"prototype":{"polluted":true}}}'),
  () => JSON.parse('{"a":{"__proto__":[]}}'),
).map((make) => make())

/** Values at the edges of what a field's schema allows, where the database or a later rule may disagree. */
const edgeValue = fc.constantFrom<unknown>(
  `urn:uuid:${pixel.id}`,
  [`URN:UUID:${pixel.id.toUpperCase()}`],
  [{ id: `urn:uuid:${pixel.id}`, platform: 'ga', value: 'UA-PROPS' }],
  ['urn:uuid:7d444840-9dc0-11d1-b245-5ffdce74fad2'],
  '0000-01-01T00:00:00Z',
  '2030-02-30T00:00:00Z',
  { enable: true, end: '0000-12-31T23:59:59Z', url: 'https://example.com/', timezone: 0 },
  { enable: true, end: '9999-12-31T23:59:59-01:00', url: 'https://example.com/', timezone: 14 },
  { enable: true, end: '2030-06-30T23:59:60Z', url: 'https://example.com/', timezone: -12 },
  { enable: false, end: '0001-01-01T00:00:00+14:00', url: 'https://example.com/', timezone: 0 },
  { enable: true },
  [2 ** 31],
  [script.id, script.id],
  2 ** 31,
  String(2 ** 31),
  [{ url: 'https://example.com/', value: '000' }],
  [{ url: 'https://example.com/', value: 'de' }, { url: 'https://example.com/b', value: 'DE' }],
  'https://GO.PROPS.TEST./loop',
  'http://[::1]/',
  'https://xn--bcher-kva.example/',
)

const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: nastyString },
  { weight: 2, arbitrary: edgeValue },
  { weight: 2, arbitrary: extremeNumber },
  { weight: 1, arbitrary: fc.constantFrom(true, false, null) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: nested },
  { weight: 1, arbitrary: hugeArray },
  { weight: 1, arbitrary: prototypeObject },
  { weight: 2, arbitrary: fc.array(nastyString, { maxLength: 6 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.oneof(fc.string(), anyUnits), nastyString, { maxKeys: 4 }) },
)

// --- Mutations of valid bodies ------------------------------------------------------------------------------

const LINK_FIELDS = [
  'url', 'domain', 'id', 'title', 'description', 'image', 'favicon', 'extraOptionsGeolocations', 'extraOptionsLinkRotator',
  'folderId', 'pixels', 'showGDPR', 'tags', 'note', 'deepLinkingEnable', 'linkScripts', 'linkScriptEnable', 'masking',
  'linkExpiration', 'passwordProtect',
]
const EXTRA_KEYS = ['__proto__', 'constructor', 'prototype', 'workspaceId', 'uniq', 'platform', 'value', 'name', 'content', 'enable', 'end']

interface Mutation {
  kind: 'set' | 'add' | 'delete' | 'replace'
  pick: number
  key: string
  value: unknown
}

const mutation: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom<Mutation['kind']>('set', 'set', 'set', 'add', 'add', 'delete', 'replace'),
  pick: fc.nat(),
  key: fc.oneof(fc.constantFrom(...LINK_FIELDS, ...EXTRA_KEYS), fc.string(), anyUnits),
  value: nastyValue,
})

/** Own data members only, so "__proto__" is a member like any other. */
function setMember(target: Json, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/** [parent, key] of every member of `body`, and every object or array in it (as [it, null]). */
function places(body: unknown): [Json, string | null][] {
  const found: [Json, string | null][] = []
  const stack: unknown[] = [body]
  while (stack.length > 0 && found.length < 500) {
    const value = stack.pop()
    if (value === null || typeof value !== 'object') continue
    found.push([value as Json, null])
    for (const key of Object.keys(value).slice(0, 50)) {
      found.push([value as Json, key])
      // The member's own value: reading value["__proto__"] would give the prototype, and mutate it.
      stack.push(Object.getOwnPropertyDescriptor(value, key)?.value)
    }
  }
  return found
}

function mutate(body: Json, mutations: Mutation[]): unknown {
  let root: unknown = structuredClone(body)
  for (const { kind, pick, key, value } of mutations) {
    if (kind === 'replace') {
      root = value
      continue
    }
    const candidates = places(root).filter(([, member]) => (kind === 'add' ? member === null : member !== null))
    if (candidates.length === 0) continue
    const [parent, member] = candidates[pick % candidates.length]
    if (kind === 'delete') delete parent[member!]
    else if (kind === 'add') {
      if (Array.isArray(parent)) parent.push(value)
      else setMember(parent, key, value)
    } else setMember(parent, member!, value)
  }
  return root
}

const url = fc.constantFrom('https://example.com/a', 'http://example.org/b?x=1#f', 'https://bücher.example/ü')
const slug = fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/)

/** Valid values for every field of a link (as create and update accept them). */
const linkFields = {
  url,
  domain: fc.constant(DOMAIN),
  id: slug,
  title: fc.option(fc.string({ maxLength: 40 })),
  description: fc.option(fc.string({ maxLength: 40 })),
  image: fc.oneof(fc.constant(''), fc.constant(null), url),
  favicon: fc.oneof(fc.constant(''), fc.constant(null), url),
  extraOptionsGeolocations: fc.constant([{ url: 'https://example.de/', value: 'de' }]),
  extraOptionsLinkRotator: fc.constant([{ url: 'https://example.com/b', value: '30' }]),
  folderId: fc.constantFrom(folder.id, String(folder.id), null),
  pixels: fc.constantFrom([pixel.id], [{ platform: 'ga', value: 'UA-PROPS' }], [{ platform: 'bing', value: 'B-1', title: null }], []),
  showGDPR: fc.boolean(),
  tags: fc.oneof(fc.array(fc.string({ maxLength: 10 }), { maxLength: 5 }), fc.string({ maxLength: 20 })),
  note: fc.option(fc.string({ maxLength: 40 })),
  deepLinkingEnable: fc.boolean(),
  linkScripts: fc.constantFrom([script.id], null, []),
  linkScriptEnable: fc.boolean(),
  masking: fc.boolean(),
  linkExpiration: fc.constantFrom(null, { enable: true, end: '2030-01-01T00:00:00+02:00', url: 'https://example.com/over', timezone: 2 }),
  passwordProtect: fc.constantFrom(null, { enable: false }),
}

const validCreate = fc.record(linkFields, { requiredKeys: ['url'] }).map((fields) => ({ link: fields, autofill: false }))
const { domain: _domain, id: _id, ...patchFields } = linkFields
const validPatch = fc.record(patchFields, { requiredKeys: [] }).map((fields) => ({ link: fields, autofill: false }))

const mutated = (valid: fc.Arbitrary<Json>) =>
  fc.tuple(valid, fc.array(mutation, { minLength: 1, maxLength: 3 })).map(([body, mutations]) => mutate(body, mutations))

const serialize = (body: unknown) => JSON.stringify(body) ?? 'null'

// --- Properties ---------------------------------------------------------------------------------------------

t.test('POST /v1/links/create: mutated bodies', async (t) => {
  await fc.assert(fc.asyncProperty(mutated(validCreate), async (body) => {
    await sendAndCheck('POST', '/v1/links/create', serialize(body))
  }), settings)
  t.pass(`${RUNS} bodies`)
})

t.test('PUT /v1/links/{uniq} and by domain: mutated bodies', async (t) => {
  const target = fc.constantFrom(`/v1/links/${link.uniq}`, `/v1/links/by-domain/${DOMAIN}/target`, `/v1/links/by-domain/${DOMAIN}/TARGET`)
  await fc.assert(fc.asyncProperty(target, mutated(validPatch), async (path, body) => {
    await sendAndCheck('PUT', path, serialize(body))
  }), settings)
  t.pass(`${RUNS} bodies`)
})

/** A path parameter: ids and slugs near the valid ones, and anything else that is well-formed Unicode. */
const pathParameter = fc
  .oneof(
    fc.constantFrom('0', '00', '012', '1e1', '0x10', ' 1', '-1', '99999999999999999999', 'target', 'TARGET', '\u0000', 'a\u0000b', '😀', '..', '%', '__proto__'),
    fc.string({ minLength: 1, maxLength: 30 }),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 10 }),
    fc.nat().map(String),
  )
  .map((text) => encodeURIComponent(text))

t.test('link routes by uniq and by domain: random path parameters', async (t) => {
  const routes = fc.constantFrom(
    (p: string) => ['GET', `/v1/links/${p}`],
    (p: string) => ['PUT', `/v1/links/${p}`],
    (p: string) => ['DELETE', `/v1/links/${p}`],
    (p: string) => ['GET', `/v1/links/by-domain/${p}/target`],
    (p: string) => ['GET', `/v1/links/by-domain/${DOMAIN}/${p}`],
    (p: string) => ['PUT', `/v1/links/by-domain/${DOMAIN}/${p}`],
    (p: string) => ['DELETE', `/v1/links/by-domain/${p}/${p}`],
  )
  // The fixture itself is not deleted: it is what the update properties change.
  const parameter = pathParameter.filter((p) => p.toLowerCase() !== 'target' && p !== String(link.uniq))
  await fc.assert(fc.asyncProperty(routes, parameter, async (route, p) => {
    const [method, path] = route(p)
    await sendAndCheck(method, path, method === 'PUT' ? serialize({ link: { title: 'changed' } }) : undefined)
  }), settings)
  t.pass(`${RUNS} requests`)
})

/** Percent-encoded; a lone surrogate has no UTF-8 form, so it becomes the bytes a careless client would send. */
function encodeOrBadly(text: string): string {
  try {
    return encodeURIComponent(text)
  } catch {
    return '%ED%A0%80'
  }
}

/** A query string of known and unknown parameters, each value anything (encoded), sometimes badly encoded. */
function queryOf(names: string[]) {
  const value = fc.oneof(
    nastyString.map(encodeOrBadly),
    fc.constantFrom('%C3', '%FF%FE', '%', '%2', '+', '1e1', '0x10', '%2012', '10', '1', 'true', 'false'),
  )
  const name = fc.oneof(fc.constantFrom(...names, '__proto__', 'constructor'), fc.string({ maxLength: 8 }).map(encodeURIComponent))
  return fc.array(fc.tuple(name, value), { maxLength: 6 }).map((pairs) => pairs.map(([key, text]) => `${key}=${text}`).join('&'))
}

t.test('GET /v1/links: random queries', async (t) => {
  const query = queryOf(['limit', 'cursor', 'domain', 'folderId', 'tag', 'q', 'createdAfter', 'createdBefore'])
  await fc.assert(fc.asyncProperty(query, async (q) => {
    await sendAndCheck('GET', `/v1/links?${q}`)
  }), settings)
  t.pass(`${RUNS} queries`)
})

t.test('folders: mutated bodies, random ids and delete queries', async (t) => {
  const body = mutated(fc.record({ name: fc.string({ minLength: 1, maxLength: 30 }) }))
  const routes = fc.constantFrom('POST /v1/folders', `PUT /v1/folders/${folder.id}`)
  await fc.assert(fc.asyncProperty(routes, body, async (route, b) => {
    const [method, path] = route.split(' ')
    await sendAndCheck(method, path, serialize(b))
  }), settings)
  const query = queryOf(['moveLinksTo', 'force'])
  await fc.assert(fc.asyncProperty(pathParameter, query, async (id, q) => {
    // A folder of its own for each delete, so that a valid one takes nothing away from the other properties.
    const victim = await post('/v1/folders', { name: `victim ${Math.random()}` })
    await sendAndCheck('DELETE', `/v1/folders/${id.replace(/^[1-9]\d*$/, String(victim.id))}?${q}`)
    await sendAndCheck('PUT', `/v1/folders/${id}`, serialize({ name: 'renamed' }))
  }), settings)
  t.pass(`${RUNS * 2} requests`)
})

t.test('pixels: mutated bodies and random ids', async (t) => {
  const valid = fc.record(
    { platform: fc.constantFrom(...PLATFORMS), value: fc.string({ minLength: 1, maxLength: 20 }), title: fc.option(fc.string({ maxLength: 20 })) },
    { requiredKeys: [] },
  )
  const routes = fc.constantFrom('POST /v1/pixels', `PUT /v1/pixels/${pixel.id}`, `PUT /v1/pixels/${pixel.id.toUpperCase()}`)
  await fc.assert(fc.asyncProperty(routes, mutated(valid), async (route, b) => {
    const [method, path] = route.split(' ')
    await sendAndCheck(method, path, serialize(b))
  }), settings)
  await fc.assert(fc.asyncProperty(pathParameter, async (id) => {
    await sendAndCheck('PUT', `/v1/pixels/${id}`, serialize({ title: 'x' }))
    await sendAndCheck('DELETE', `/v1/pixels/${id}`)
  }), settings)
  t.pass(`${RUNS * 2} requests`)
})

t.test('scripts: mutated bodies and random ids', async (t) => {
  const valid = fc.record({ name: fc.string({ minLength: 1, maxLength: 20 }), content: fc.string({ minLength: 1, maxLength: 200 }) }, { requiredKeys: [] })
  const routes = fc.constantFrom('POST /v1/scripts', `PUT /v1/scripts/${script.id}`)
  await fc.assert(fc.asyncProperty(routes, mutated(valid), async (route, b) => {
    const [method, path] = route.split(' ')
    await sendAndCheck(method, path, serialize(b))
  }), settings)
  await fc.assert(fc.asyncProperty(pathParameter.filter((id) => id !== String(script.id)), async (id) => {
    await sendAndCheck('GET', `/v1/scripts/${id}`)
    await sendAndCheck('PUT', `/v1/scripts/${id}`, serialize({ name: 'x' }))
    await sendAndCheck('DELETE', `/v1/scripts/${id}`)
  }), settings)
  t.pass(`${RUNS * 2} requests`)
})

t.test('bodies that are not JSON, or not UTF-8, or JSON text cut and spliced', async (t) => {
  const valid = serialize({ link: { url: 'https://example.com/', tags: ['a'], pixels: [{ platform: 'ga', value: 'v' }] }, autofill: false })
  const payload = fc.oneof(
    fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes)),
    fc.string({ unit: 'binary', maxLength: 100 }),
    fc.tuple(fc.nat(valid.length), fc.nat(valid.length), fc.oneof(anyUnits, fc.constantFrom('\\u0000', '\\ud800', '"', '{', ']', ',', '\\'))).map(
      ([at, cut, text]) => valid.slice(0, Math.min(at, cut)) + text + valid.slice(Math.max(at, cut)),
    ),
  )
  const contentType = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/json; charset=latin1', 'text/plain')
  const routes = fc.constantFrom('POST /v1/links/create', `PUT /v1/links/${link.uniq}`, 'POST /v1/folders', 'POST /v1/pixels', 'POST /v1/scripts')
  await fc.assert(fc.asyncProperty(routes, payload, contentType, async (route, body, type) => {
    const [method, path] = route.split(' ')
    await sendAndCheck(method, path, body, { 'content-type': type })
  }), settings)
  t.pass(`${RUNS} bodies`)
})

t.test('no request of this file made the app log an error', async (t) => {
  t.same(log.errorLines(), [])
})
