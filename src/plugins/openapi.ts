import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { maxHeaderSize } from 'node:http'
import { COMPONENT_SCHEMAS } from '../../schemas/components.js'
import type { Config } from '../config/config.js'
import { HTTP_TIMEOUTS } from './http-server.js'
import { documentHttpAnswers } from './openapi-http-answers.js'

type Media = { schema?: { $ref?: string }; example?: unknown }
interface OpenApiDocument {
  components?: { schemas?: Record<string, { examples?: unknown[] }> }
  paths?: Record<string, Record<string, { requestBody?: { content?: Record<string, Media> } } | undefined>>
}

/**
 * Request bodies are named schemas (schemas/components.ts), so the document refers to them, and a reference drops the
 * schema's example: each body gets its schema's first example back, as the answers have theirs.
 */
function withBodyExamples<T extends object>(document: T): T {
  const { components, paths } = document as OpenApiDocument
  const schemas = components?.schemas ?? {}
  for (const operations of Object.values(paths ?? {})) {
    for (const operation of Object.values(operations)) {
      for (const media of Object.values(operation?.requestBody?.content ?? {})) {
        const name = media.schema?.$ref?.replace('#/components/schemas/', '')
        const example = name === undefined ? undefined : schemas[name]?.examples?.[0]
        if (example !== undefined && media.example === undefined) media.example = example
      }
    }
  }
  return document
}

/**
 * The OpenAPI 3.1 document is generated from the route schemas (GET /openapi.json) and shown by
 * Swagger UI (GET /docs); nothing about the API is written twice.
 */
export default fp(
  async function openapi(app: FastifyInstance, options: { config: Pick<Config, 'publicUrl'> }) {
    // Registered once at the root and referenced by $id, so the document names them (schemas/components.ts).
    // (A route plugin that added schemas of its own would get Fastify's default, coercing body validator back.)
    for (const schema of COMPONENT_SCHEMAS) app.addSchema(schema)
    // Before swagger's own onRoute hook, which collects the routes for the document.
    app.addHook('onRoute', documentHttpAnswers)
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Short-link management API',
          version: '1.0.0',
          description:
            'Create and update branded short links. Every /v1 request carries `Api-Authorization: <token>`. ' +
            'Errors are application/problem+json with a `code` and, for bad input, the JSON pointer of each field. ' +
            'Any request may also be answered, before it reaches an operation, 400 `bad_request` (not valid HTTP/1.1, ' +
            'or no valid Host header), 417 `expectation_failed` (an Expect other than 100-continue), ' +
            `408 \`request_timeout\` (headers not in within ${HTTP_TIMEOUTS.headersMs / 1000} s, or the whole request ` +
            `within ${HTTP_TIMEOUTS.requestMs / 1000} s), 431 \`headers_too_large\` (request line and headers over ` +
            `${maxHeaderSize / 1024} KiB; these three close the connection), ` +
            '404 `not_found` (no such operation) or, while the service shuts down, 503 `unavailable` with ' +
            '`Retry-After` and `Connection: close`; and, while the instance is overloaded, 503 `unavailable` with ' +
            '`Retry-After` (every operation but the health probes and /metrics).',
          // The service's own pages: the project has no public contact address or open licence to name.
          contact: { name: 'Short-link service API', url: `${options.config.publicUrl}/docs` },
          license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
        },
        servers: [{ url: options.config.publicUrl, description: 'This service (PUBLIC_URL)' }],
        // Every operation needs the token unless it says otherwise (the health probes: security: []).
        security: [{ apiToken: [] }],
        components: {
          securitySchemes: {
            apiToken: { type: 'apiKey', in: 'header', name: 'Api-Authorization' },
            metricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN, when the service has one set (GET /metrics only)' },
          },
        },
        tags: [
          { name: 'links', description: 'Create, read, list, update and delete short links' },
          { name: 'folders', description: "The workspace's folders of links" },
          { name: 'pixels', description: "The workspace's tracking pixels, which links use" },
          { name: 'scripts', description: "The workspace's HTML/JavaScript snippets, which links attach" },
          { name: 'stats', description: 'Click analytics: clicks, unique visitors and bots of links and the workspace, and raw visits' },
          { name: 'health', description: 'Liveness and readiness probes, and the Prometheus metrics' },
        ],
      },
      refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
      transformObject: (document) => ('openapiObject' in document ? withBodyExamples(document.openapiObject) : document.swaggerObject),
    })
    await app.register(swaggerUi, {
      routePrefix: '/docs',
      uiConfig: { docExpansion: 'list' },
      // Framed by no other site: people paste their token there. (The plugin's own full policy, staticCSP, blocks
      // the inline styles Swagger UI sets as it renders.)
      uiHooks: {
        onRequest: (_request: FastifyRequest, reply: FastifyReply, done: () => void) => {
          reply.header('content-security-policy', "frame-ancestors 'none'").header('x-frame-options', 'DENY')
          done()
        },
      },
    })
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
  },
  { name: 'openapi' },
)
