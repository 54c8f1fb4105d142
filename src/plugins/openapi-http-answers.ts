/**
 * What the HTTP layer answers on a route before its handler runs, documented once here for every route it
 * applies to instead of in each route file (an onRoute hook of src/plugins/openapi.ts):
 * - every route: 400 bad_request for a request that is not valid HTTP/1.1, 408 request_timeout, 417
 *   expectation_failed and 431 headers_too_large (src/plugins/http-server.ts), and 503 unavailable while the
 *   instance shuts down (src/plugins/graceful-close.ts);
 * - a route with path parameters: 400 bad_request for a parameter that is not valid percent-encoding too, and
 *   414 uri_too_long for one over the router's limit;
 * - a route whose method has a body, DELETE included (Fastify reads a body on any method but GET and HEAD):
 *   400 invalid_json, 413 payload_too_large and 415 unsupported_media_type.
 * A response the route documents already keeps its description and gains the missing examples (and the
 * problem+json content, where the route's own answer of that status is another type: /readyz's 503).
 */
import { Type } from '@sinclair/typebox'
import type { RouteOptions } from 'fastify'
import { Problem } from '../../schemas/problem.js'
import { invalidJson, payloadTooLarge, unsupportedMediaType, type AppError } from '../errors/app-error.js'
import { expectationFailed, headersTooLarge, missingHost, requestTimeout, shuttingDown, uriTooLong } from '../errors/http-errors.js'
import { BODY_LIMIT } from './errors.js'
import { MAX_PARAM_LENGTH } from './http-server.js'
import { PROBLEM_MEDIA_TYPE } from './openapi-responses.js'

interface DocumentedResponse {
  description: string
  headers?: unknown
  content: Record<string, { schema: unknown; examples?: Record<string, { value: unknown }> }>
}

interface HttpAnswer {
  error: AppError
  /** What the description says of it. */
  when: string
  headers?: Record<string, unknown>
}

const RETRY_AFTER = { 'Retry-After': Type.Integer({ minimum: 1, description: 'Seconds to wait before trying again' }) }

/** What any route can get. */
const EVERY_ROUTE: HttpAnswer[] = [
  { error: requestTimeout(), when: 'request_timeout: the headers did not arrive within 10 s, or the whole request within 30 s' },
  { error: expectationFailed(), when: 'expectation_failed: an Expect header other than 100-continue' },
  { error: headersTooLarge(), when: 'headers_too_large: the request line and headers are over 16 KiB; the connection is closed' },
  { error: shuttingDown(), when: 'unavailable: the instance is shutting down (Connection: close); send it again', headers: RETRY_AFTER },
]

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

function answersOf(route: RouteOptions): HttpAnswer[] {
  const parameters = route.url.includes(':')
  const invalidHttp = 'bad_request: not valid HTTP/1.1 (no Host header, several or an invalid one, or both Content-Length and Transfer-Encoding)'
  const answers: HttpAnswer[] = [
    ...EVERY_ROUTE,
    { error: missingHost(), when: parameters ? `${invalidHttp}, or a path parameter that is not valid percent-encoded UTF-8` : invalidHttp },
  ]
  if (parameters) {
    answers.push({ error: uriTooLong(MAX_PARAM_LENGTH), when: `uri_too_long: a path parameter is over ${MAX_PARAM_LENGTH} characters` })
  }
  if ([route.method].flat().some((method) => BODY_METHODS.has(method))) {
    const limit = route.bodyLimit ?? BODY_LIMIT
    answers.push(
      { error: invalidJson('Unexpected end of JSON input'), when: 'invalid_json: the body is not valid JSON' },
      { error: payloadTooLarge(limit), when: `payload_too_large: body over ${limit / 1024} KiB` },
      { error: unsupportedMediaType(), when: 'unsupported_media_type: the body must be application/json' },
    )
  }
  return answers
}

/** Adds the HTTP layer's answers to the route's documented responses (a new object: route files share theirs). */
export function documentHttpAnswers(route: RouteOptions): void {
  const responses = route.schema?.response as Record<string, DocumentedResponse> | undefined
  if (!responses || route.schema?.hide) return
  const documented: Record<string, DocumentedResponse> = { ...responses }
  for (const { error, when, headers } of answersOf(route)) {
    const current = documented[error.status]
    const examples = current?.content[PROBLEM_MEDIA_TYPE]?.examples ?? {}
    if (error.code in examples) continue
    documented[error.status] = {
      ...current,
      description: current ? `${current.description}; ${when}` : when,
      ...(headers && !current?.headers ? { headers } : {}),
      content: {
        ...current?.content,
        [PROBLEM_MEDIA_TYPE]: {
          schema: Type.Ref(Problem),
          examples: { ...examples, [error.code]: { value: error.toProblem() } },
        },
      },
    }
  }
  route.schema = { ...route.schema, response: documented }
}
