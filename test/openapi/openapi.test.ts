/**
 * The OpenAPI document (GET /openapi.json) and the docs page (GET /docs): the served document is the committed
 * snapshot, it is a valid and complete OpenAPI 3.1 description of every /v1 route, its examples are valid
 * instances of their schemas, and the answers on the wire match what it documents.
 */
import { readFile } from 'node:fs/promises'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { customFormats } from '../../schemas/formats.js'
import { MAX_PARAM_LENGTH } from '../../src/plugins/http-server.js'
import { buildTestApp, client, createWorkspaceToken } from '../support/test-app.js'

type Json = Record<string, any>

const SNAPSHOT = new URL('../../schemas/openapi.snapshot.json', import.meta.url)
const PROBLEM_REF = '#/components/schemas/Problem'
const LINK_RECORD_REF = '#/components/schemas/LinkRecord'

/**
 * Every status code each operation can answer (contract sections 1, 2, 4, 6, 7, 8; issue 5; issue 9: 400
 * bad_request and 414 for a path parameter the router cannot take, 400/413/415 for a body sent with a DELETE;
 * issue 14: 409 and 422 of Idempotency-Key on the creates), besides HTTP_LAYER.
 */
/** What the HTTP layer answers on any route: 408 (too slow), 431 (headers too large). */
/** Any route may get these from the HTTP layer: not valid HTTP/1.1, a timeout, an Expect it cannot meet, headers too large. */
const HTTP_LAYER = [400, 408, 417, 431]

const EXPECTED_STATUSES: Record<string, number[]> = {
  createLink: [201, 400, 401, 403, 409, 413, 415, 422, 429, 500, 503],
  createLinks: [200, 400, 401, 409, 413, 415, 422, 429, 500, 503],
  updateLink: [200, 400, 401, 403, 404, 413, 414, 415, 429, 500, 503],
  updateLinkByDomain: [200, 400, 401, 403, 404, 413, 414, 415, 429, 500, 503],
  getLink: [200, 400, 401, 404, 414, 429, 500, 503],
  getLinkByDomain: [200, 400, 401, 404, 414, 429, 500, 503],
  listLinks: [200, 400, 401, 429, 500, 503],
  deleteLink: [204, 400, 401, 403, 404, 413, 414, 415, 429, 500, 503],
  deleteLinkByDomain: [204, 400, 401, 403, 404, 413, 414, 415, 429, 500, 503],
  listFolders: [200, 401, 429, 500, 503],
  createFolder: [201, 400, 401, 409, 413, 415, 429, 500, 503],
  renameFolder: [200, 400, 401, 404, 409, 413, 414, 415, 429, 500, 503],
  deleteFolder: [204, 400, 401, 404, 409, 413, 414, 415, 429, 500, 503],
  listPixels: [200, 401, 429, 500, 503],
  createPixel: [201, 400, 401, 409, 413, 415, 429, 500, 503],
  updatePixel: [200, 400, 401, 404, 409, 413, 414, 415, 429, 500, 503],
  deletePixel: [204, 400, 401, 404, 413, 414, 415, 429, 500, 503],
  listScripts: [200, 401, 429, 500, 503],
  getScript: [200, 400, 401, 404, 414, 429, 500, 503],
  createScript: [201, 400, 401, 413, 415, 429, 500, 503],
  updateScript: [200, 400, 401, 404, 413, 414, 415, 429, 500, 503],
  deleteScript: [204, 400, 401, 404, 413, 414, 415, 429, 500, 503],
  getLinkQr: [200, 304, 400, 401, 404, 414, 429, 500, 503],
  getLinkQrByDomain: [200, 304, 400, 401, 404, 414, 429, 500, 503],
  getLinkStats: [200, 400, 401, 404, 414, 429, 500, 503],
  getLinkStatsByDomain: [200, 400, 401, 404, 414, 429, 500, 503],
  getWorkspaceStats: [200, 400, 401, 429, 500, 503],
  listLinkVisits: [200, 400, 401, 404, 414, 429, 500, 503],
}

/** The shared schema each operation's success answers with; null for a 204 without a body. */
const SUCCESS_SCHEMAS: Record<string, string | null> = {
  createLink: 'LinkRecord',
  createLinks: 'BulkCreateResult',
  updateLink: 'LinkRecord',
  updateLinkByDomain: 'LinkRecord',
  getLink: 'LinkRecord',
  getLinkByDomain: 'LinkRecord',
  listLinks: 'LinkList',
  deleteLink: null,
  deleteLinkByDomain: null,
  listFolders: 'FolderList',
  createFolder: 'FolderRecord',
  renameFolder: 'FolderRecord',
  deleteFolder: null,
  listPixels: 'PixelList',
  createPixel: 'Pixel',
  updatePixel: 'Pixel',
  deletePixel: null,
  listScripts: 'ScriptList',
  getScript: 'ScriptRecord',
  createScript: 'ScriptRecord',
  updateScript: 'ScriptRecord',
  deleteScript: null,
  getLinkStats: 'LinkStats',
  getLinkStatsByDomain: 'LinkStats',
  getWorkspaceStats: 'WorkspaceStats',
  listLinkVisits: 'VisitList',
}

/** Operations whose success is an image rather than JSON: the media types it is documented with. */
const IMAGE_MEDIA_TYPES: Record<string, string[]> = {
  getLinkQr: ['image/svg+xml', 'image/png'],
  getLinkQrByDomain: ['image/svg+xml', 'image/png'],
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']

/**
 * The routes the app registers, read from Fastify's own route tree (printRoutes), independently of the
 * document: `METHOD /path/{param}` for each. Each line of the tree is `<indent>├── <segment> (<METHODS>)`,
 * four characters of indentation per level, a segment continuing its parent's path.
 */
function registeredRoutes(app: FastifyInstance): string[] {
  const routes: string[] = []
  const stack: string[] = []
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^(.*?)[├└]── (.+?)(?: \(([^)]+)\))?$/.exec(line)
    if (!match) continue
    const depth = match[1].length / 4
    stack.length = depth
    stack.push(match[2])
    const path = stack.join('').replace(/:(\w+)/g, '{$1}')
    for (const method of match[3]?.split(', ') ?? []) routes.push(`${method} ${path}`)
  }
  return routes
}

/** The document's operations under /v1 as `METHOD /path` → operation. */
function documentedOperations(document: Json): Map<string, Json> {
  const operations = new Map<string, Json>()
  for (const [path, item] of Object.entries<Json>(document.paths)) {
    for (const method of HTTP_METHODS) {
      if (item[method]) operations.set(`${method.toUpperCase()} ${path}`, item[method])
    }
  }
  return operations
}

/** Validates instances against the document's own schemas, with the service's custom formats. */
function schemaChecker(document: Json) {
  type AddFormats = (ajv: Ajv2020) => Ajv2020
  const addFormats: AddFormats =
    (addFormatsModule as unknown as { default: AddFormats }).default ?? (addFormatsModule as unknown as AddFormats)
  const ajv = new Ajv2020({ strict: false, allErrors: true })
  addFormats(ajv)
  for (const [name, check] of Object.entries(customFormats)) ajv.addFormat(name, { type: 'string', validate: check })
  // The schemas' $refs point into the document (#/components/schemas/…): compile them with the components beside.
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>()
  return (schema: Json, value: unknown): string[] => {
    const key = JSON.stringify(schema)
    const validate = compiled.get(key) ?? ajv.compile({ ...schema, components: document.components })
    compiled.set(key, validate)
    return validate(value) ? [] : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message}`)
  }
}

// One app (and database) for the whole file: nothing here depends on another test's data.
const { app, prisma } = await buildTestApp(t)

t.test('the document', async (t) => {
  const served = await app.inject({ method: 'GET', url: '/openapi.json' })
  t.equal(served.statusCode, 200)
  t.match(served.headers['content-type'], /^application\/json/)
  const document = served.json<Json>()
  const check = schemaChecker(document)

  t.test('equals the committed snapshot', async (t) => {
    const snapshot = JSON.parse(await readFile(SNAPSHOT, 'utf8'))
    t.strictSame(
      document,
      snapshot,
      'GET /openapi.json differs from schemas/openapi.snapshot.json. If the API change is intended, run ' +
        '`npm run openapi:snapshot` and commit the updated snapshot; otherwise a route or schema changed by accident.',
    )
  })

  t.test('is valid OpenAPI 3.1', async (t) => {
    t.equal(document.openapi, '3.1.0')
    const result = await new Validator().validate(document)
    t.same(result.errors, undefined, 'no validation errors')
    t.equal(result.valid, true)
  })

  t.test('documents every /v1 route the app registers, and no other', async (t) => {
    const v1 = registeredRoutes(app).filter((route) => route.split(' ')[1].startsWith('/v1/'))
    // Fastify answers HEAD for every GET by itself (exposeHeadRoutes); the document lists the GET.
    const registered = v1.filter((route) => !(route.startsWith('HEAD ') && v1.includes(route.replace(/^HEAD/, 'GET'))))
    t.ok(registered.length >= 3, `found the /v1 routes in the route tree: ${registered.join(', ')}`)
    const operations = documentedOperations(document)
    const documented = [...operations.keys()].filter((route) => route.split(' ')[1].startsWith('/v1/'))
    t.same([...documented].sort(), [...registered].sort())
    const operationIds = documented.map((route) => operations.get(route)!.operationId)
    t.same([...operationIds].sort(), Object.keys(EXPECTED_STATUSES).sort(), 'one operationId each, all known')
  })

  t.test('issue 12: servers, contact, licence, public probes, integer ids, plain enums, named inputs', async (t) => {
    t.same(document.servers, [{ url: 'http://127.0.0.1:3000', description: 'This service (PUBLIC_URL)' }])
    t.ok(document.info.contact?.url, 'info.contact')
    t.ok(document.info.license?.name, 'info.license')
    t.same(document.security, [{ apiToken: [] }], 'a global security requirement')
    for (const [path, operationId] of [['/healthz', 'getHealth'], ['/readyz', 'getReadiness']]) {
      t.match(document.paths[path].get, { operationId, security: [], description: String }, `${path} is public`)
    }
    // Path ids that are integers in the records are integers here.
    for (const [path, name] of [['/v1/links/{uniqId}', 'uniqId'], ['/v1/folders/{id}', 'id'], ['/v1/scripts/{id}', 'id']]) {
      const operation = Object.values<Json>(document.paths[path])[0]
      const parameter = operation.parameters.find((candidate: Json) => candidate.name === name)
      t.match(parameter.schema, { type: 'integer', minimum: 1, maximum: 2147483647 }, `${path}: ${name} is an integer`)
    }
    // No anyOf whose branches are all constants (generators render it poorly): those are enums.
    const constantUnions: string[] = []
    const walk = (node: unknown, at: string) => {
      if (Array.isArray(node)) return node.forEach((item, index) => walk(item, `${at}/${index}`))
      if (!node || typeof node !== 'object') return
      const anyOf = (node as Json).anyOf
      if (Array.isArray(anyOf) && anyOf.every((branch: Json) => 'const' in branch)) constantUnions.push(at)
      for (const [key, value] of Object.entries(node)) walk(value, `${at}/${key}`)
    }
    walk(document, '#')
    t.same(constantUnions, [], 'no anyOf of constants')
    t.same(
      document.paths['/v1/links/create'].post.requestBody.content['application/json'].schema.properties.link,
      { $ref: '#/components/schemas/LinkInput' },
      'create takes a LinkInput',
    )
    for (const path of ['/v1/links/{uniqId}', '/v1/links/by-domain/{domain}/{id}']) {
      t.same(
        document.paths[path].put.requestBody.content['application/json'].schema.properties.link,
        { $ref: '#/components/schemas/LinkPatch' },
        `${path}: update takes a LinkPatch`,
      )
    }
  })

  t.test('issue 14: Idempotency-Key on the two creates, its answers and the replay header', async (t) => {
    for (const path of ['/v1/links/create', '/v1/links/bulk']) {
      const operation = document.paths[path].post
      const header = operation.parameters.find((parameter: Json) => parameter.in === 'header' && parameter.name === 'Idempotency-Key')
      t.match(header, { required: false, description: /24 hours/, schema: { type: 'string' } }, `${path}: the header is documented`)
      t.same(check(header.schema, header.example), [], `${path}: its example fits`)
      t.ok(operation.responses[409].content['application/problem+json'].examples.idempotency_key_in_use, `${path}: 409 idempotency_key_in_use`)
      t.ok(operation.responses[422].content['application/problem+json'].examples.idempotency_key_reused, `${path}: 422 idempotency_key_reused`)
      const success = operation.responses[path.endsWith('create') ? 201 : 200]
      t.same(success.headers['Idempotent-Replayed']?.schema, { type: 'string', enum: ['true'] }, `${path}: the replay header`)
    }
    const others = [...documentedOperations(document).entries()].filter(([route]) => !/^POST \/v1\/links\/(create|bulk)$/.test(route))
    t.same(
      others.filter(([, operation]) => (operation.parameters ?? []).some((parameter: Json) => parameter.name === 'Idempotency-Key')).map(([route]) => route),
      [],
      'no other operation takes it',
    )
  })

  t.test('the security schemes: the Api-Authorization header, and the bearer METRICS_TOKEN of /metrics', async (t) => {
    t.match(document.components.securitySchemes, {
      apiToken: { type: 'apiKey', in: 'header', name: 'Api-Authorization' },
      metricsToken: { type: 'http', scheme: 'bearer' },
    })
    t.same(Object.keys(document.components.securitySchemes).sort(), ['apiToken', 'metricsToken'])
    t.same(document.paths['/metrics'].get.security, [{}, { metricsToken: [] }], '/metrics: nothing, or the bearer token')
  })

  t.test('the probes and /metrics document what they answer, the 503 of a shutting-down instance included', async (t) => {
    const PROBLEM = 'application/problem+json'
    for (const [path, statuses] of [['/healthz', [200, 400, 408, 417, 431, 503]], ['/readyz', [200, 400, 408, 417, 431, 503]], ['/metrics', [200, 400, 401, 408, 417, 431, 503]]] as const) {
      const responses = document.paths[path].get.responses
      t.same(Object.keys(responses).map(Number).sort(), [...statuses].sort(), path)
      t.ok(responses[503].content[PROBLEM].examples.unavailable, `${path}: the shutdown 503 is a problem`)
      t.ok(responses[503].headers['Retry-After'], `${path}: with Retry-After`)
    }
    t.ok(document.paths['/readyz'].get.responses[503].content['application/json'], "/readyz: and its own 503 (not ready) is its status JSON")
  })

  for (const [route, operation] of documentedOperations(document)) {
    if (!route.split(' ')[1].startsWith('/v1/')) continue
    t.test(route, async (t) => {
      const [method, path] = route.split(' ')
      t.type(operation.operationId, 'string', 'has an operationId')
      t.ok(operation.summary, 'has a summary')
      t.same(operation.security, [{ apiToken: [] }], 'requires the API token')

      const pathParameters = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1])
      const documentedParameters = (operation.parameters ?? []).filter((parameter: Json) => parameter.in === 'path')
      t.same(documentedParameters.map((parameter: Json) => parameter.name).sort(), [...pathParameters].sort(), 'path parameters')
      for (const parameter of documentedParameters) {
        t.equal(parameter.required, true, `${parameter.name} is required`)
        t.ok(parameter.description, `${parameter.name} is described`)
        t.not(parameter.example, undefined, `${parameter.name} has an example`)
        t.same(check(parameter.schema, parameter.example), [], `the example of ${parameter.name} fits its schema`)
      }

      if (method === 'POST' || method === 'PUT') {
        const body = operation.requestBody?.content?.['application/json']
        t.equal(operation.requestBody?.required, true, 'the body is required')
        t.ok(body?.schema, 'the body has a schema')
        t.not(body?.example, undefined, 'the body has an example')
        t.same(check(body.schema, body.example), [], 'the body example fits the body schema')
      }

      const statuses = [...new Set([...EXPECTED_STATUSES[operation.operationId], ...HTTP_LAYER])]
      t.same(Object.keys(operation.responses).map(Number).sort(), [...statuses].sort(), 'a response for every status')
      for (const status of statuses) {
        const response = operation.responses[status]
        t.ok(response.description && response.description !== 'Default Response', `${status} is described`)
        if (status === 304) {
          t.equal(response.content, undefined, '304 has no body')
          t.ok(response.headers?.ETag, '304 documents the ETag')
          continue
        }
        const images = IMAGE_MEDIA_TYPES[operation.operationId]
        if (status < 300 && images) {
          t.same(Object.keys(response.content), images, `${status} is an image`)
          for (const type of images) t.equal(response.content[type].schema.contentMediaType, type, `${type} says its media type`)
          continue
        }
        if (status < 300) {
          const success = SUCCESS_SCHEMAS[operation.operationId]
          if (success === null) {
            t.equal(response.content, undefined, `${status} has no body`)
            continue
          }
          t.same(Object.keys(response.content), ['application/json'], `${status} is JSON`)
          const media = response.content['application/json']
          t.same(media.schema, { $ref: `#/components/schemas/${success}` }, `${status} answers a ${success}`)
          t.same(check(media.schema, media.example), [], `the ${status} example is a ${success}`)
          continue
        }
        t.same(Object.keys(response.content), ['application/problem+json'], `${status} is application/problem+json`)
        const media = response.content['application/problem+json']
        t.same(media.schema, { $ref: PROBLEM_REF }, `${status} answers a Problem`)
        const examples = Object.entries<Json>(media.examples ?? {})
        t.ok(examples.length > 0, `${status} has examples`)
        for (const [name, example] of examples) {
          t.equal(example.value.status, status, `the ${status} example ${name} has that status`)
          t.equal(example.value.code, name, `the ${status} example ${name} has that code`)
          t.same(check(media.schema, example.value), [], `the ${status} example ${name} is a Problem`)
        }
        if (status === 429) t.equal(response.headers?.['Retry-After']?.schema?.type, 'integer', '429 documents Retry-After')
      }
    })
  }

  t.test('answers on the wire match the document', async (t) => {
    const token = await createWorkspaceToken(prisma, { workspace: 'wire', defaultDomain: 'go.wire.test' })
    const api = client(app, token)
    const problem = { $ref: PROBLEM_REF }

    const created = await api.create({ url: 'https://example.com/', id: 'wire', tags: 'a,b' })
    t.equal(created.statusCode, 201)
    t.match(created.headers['content-type'], /^application\/json/)
    t.same(check({ $ref: LINK_RECORD_REF }, created.json()), [], 'the 201 body is a LinkRecord')

    const updated = await api.update(created.json().uniq, { title: 'Wire' })
    t.equal(updated.statusCode, 200)
    t.same(check({ $ref: LINK_RECORD_REF }, updated.json()), [], 'the 200 body is a LinkRecord')

    // The answers of the other resources, each checked against the schema its operation documents.
    const headers = { 'api-authorization': token }
    const get = (url: string) => app.inject({ method: 'GET', url, headers })
    const folder = await api.send('POST', '/v1/folders', { name: 'Wire' })
    const pixel = await api.send('POST', '/v1/pixels', { platform: 'ga', value: 'UA-WIRE' })
    const script = await api.send('POST', '/v1/scripts', { name: 'Wire', content: '<b>wire</b>' })
    const answers: [string, { statusCode: number; json(): unknown }][] = [
      ['LinkRecord', await get(`/v1/links/${created.json().uniq}`)],
      ['LinkList', await get('/v1/links?limit=1')],
      ['FolderRecord', folder],
      ['FolderList', await get('/v1/folders')],
      ['Pixel', pixel],
      ['PixelList', await get('/v1/pixels')],
      ['ScriptRecord', script],
      ['ScriptRecord', await get(`/v1/scripts/${script.json().id}`)],
      ['ScriptList', await get('/v1/scripts')],
    ]
    for (const [schema, response] of answers) {
      t.ok(response.statusCode < 300, `${schema}: ${response.statusCode}`)
      t.same(check({ $ref: `#/components/schemas/${schema}` }, response.json()), [], `the body is a ${schema}`)
    }
    // The QR code: an image of each documented type, as the format asks.
    for (const [format, type] of [['svg', 'image/svg+xml'], ['png', 'image/png']]) {
      const image = await get(`/v1/links/${created.json().uniq}/qr?format=${format}`)
      t.equal(image.statusCode, 200, `QR ${format}`)
      t.equal(image.headers['content-type'], type, `QR ${format} is ${type}`)
    }

    const errors = [
      await client(app, 'not-a-token').create({ url: 'https://example.com/' }),
      await api.create({ url: 'javascript:alert(1)', title: 5 }),
      await api.create({ url: 'https://example.com/', id: 'wire' }),
      await api.send('POST', '/v1/links/create', '{"link":', {}),
      await api.send('POST', '/v1/links/create', 'url=x', { 'content-type': 'text/plain' }),
      await api.update(999999, {}),
      await api.updateByDomain('go.wire.test', 'nope', {}),
      await get('/v1/links?cursor=nope'),
      await api.send('POST', '/v1/folders', { name: 'Wire' }),
      await api.send('POST', '/v1/pixels', { platform: 'ga', value: 'UA-WIRE' }),
      await app.inject({ method: 'DELETE', url: '/v1/scripts/999999', headers }),
    ]
    t.same(
      errors.map((response) => response.statusCode),
      [401, 400, 409, 400, 415, 404, 404, 400, 409, 409, 404],
    )
    for (const response of errors) {
      t.match(response.headers['content-type'], /^application\/problem\+json/, `${response.statusCode} is a problem`)
      t.same(check(problem, response.json()), [], `the ${response.statusCode} body is a Problem`)
    }
    // The field list survives serialization by the documented schema.
    t.match(errors[1].json(), { code: 'validation_failed', errors: [{ path: '/link/url' }, { path: '/link/title' }] })
  })
})

t.test('what the HTTP layer answers on each operation is documented there, with its code', async (t) => {
  const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<Json>()
  const token = await createWorkspaceToken(prisma, { workspace: 'layer', defaultDomain: 'go.layer.test' })
  const json = { 'api-authorization': token, 'content-type': 'application/json' }
  for (const [route, operation] of documentedOperations(document)) {
    const [method, path] = route.split(' ')
    if (!path.startsWith('/v1/')) continue
    // The path with each parameter's example, or the `broken` value for the first parameter.
    const url = (broken?: string) => {
      let first = true
      return path.replace(/\{(\w+)\}/g, (_match, name: string) => {
        const example = operation.parameters.find((parameter: Json) => parameter.name === name).example
        const value = first && broken !== undefined ? broken : encodeURIComponent(String(example))
        first = false
        return value
      })
    }
    const probes: [string, () => Promise<{ statusCode: number; body: string }>][] = []
    if (path.includes('{')) {
      probes.push(
        ['a parameter that is not percent-encoded UTF-8', () => app.inject({ method, url: url('%C3'), headers: json })],
        ['a parameter over the router limit', () => app.inject({ method, url: url('9'.repeat(MAX_PARAM_LENGTH + 1)), headers: json })],
      )
    }
    if (method !== 'GET') {
      const send = (payload: string, headers: Record<string, string>) => () =>
        app.inject({ method, url: url(), headers: { ...json, ...headers }, payload })
      probes.push(
        ['malformed JSON', send('{"link":', {})],
        ['a body over the body limit', send(JSON.stringify({ padding: 'p'.repeat(600 * 1024) }), {})],
        ['a body that is not JSON', send('name=x', { 'content-type': 'text/plain' })],
      )
    }
    for (const [probe, request] of probes) {
      const response = await request()
      const answer = JSON.parse(response.body)
      const documented = operation.responses[response.statusCode]?.content?.['application/problem+json']
      t.ok(documented, `${route}, ${probe}: ${response.statusCode} is documented`)
      t.ok(documented?.examples?.[answer.code], `${route}, ${probe}: its code ${answer.code} is among the examples`)
    }
  }
})

t.test('GET /docs answers the interactive page', async (t) => {
  let url = '/docs'
  let response = await app.inject({ method: 'GET', url })
  for (let hops = 0; hops < 3 && response.statusCode >= 300 && response.statusCode < 400; hops++) {
    url = new URL(String(response.headers.location), `http://localhost${url}`).pathname
    response = await app.inject({ method: 'GET', url })
  }
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^text\/html/)
  t.match(response.body, /<html/i)
  t.match(response.body, /swagger/i)

  // The page shows the same document as GET /openapi.json.
  const [shown, served] = await Promise.all([
    app.inject({ method: 'GET', url: '/docs/json' }),
    app.inject({ method: 'GET', url: '/openapi.json' }),
  ])
  t.equal(shown.statusCode, 200)
  t.strictSame(shown.json(), served.json())
})
