/** How responses are documented in the OpenAPI document, shared by every route module. */
import { Type, type TSchema } from '@sinclair/typebox'
import { formatMessages } from '../../schemas/formats.js'
import { Problem } from '../../schemas/problem.js'
import {
  type AppError,
  domainNotAllowed,
  domainReserved,
  fieldError,
  internal,
  invalidJson,
  notFound,
  payloadTooLarge,
  redirectLoop,
  slugReserved,
  slugTaken,
  tooManyRequests,
  unauthorized,
  unavailable,
  unsupportedMediaType,
} from '../errors/app-error.js'
import { BODY_LIMIT } from './errors.js'

export const PROBLEM_MEDIA_TYPE = 'application/problem+json'

const problemDescriptions: Record<number, string> = {
  400: 'Bad body: invalid_json, validation_failed (every offending field by JSON pointer), redirect_loop, slug_reserved',
  401: 'unauthorized: the Api-Authorization token is missing, unknown or revoked',
  403: 'domain_reserved or domain_not_allowed',
  404: "not_found: no such link in the token's workspace",
  409: 'slug_taken: the slug is already used on that domain',
  413: 'payload_too_large: body over 64 KiB',
  415: 'unsupported_media_type: the body must be application/json',
  429: 'rate_limited: too many requests; Retry-After says when to try again',
  500: 'internal',
  503: 'unavailable: the database cannot be reached',
}

/** Examples of each error a status carries, made by the constructors the service throws (nothing written twice). */
const problemExamples: Record<number, AppError[]> = {
  400: [
    fieldError('/link/url', formatMessages['http-url']),
    invalidJson('Unexpected end of JSON input'),
    redirectLoop('/link/url', 'go.brand.com'),
    slugReserved('docs'),
  ],
  401: [unauthorized()],
  403: [domainReserved('short.example'), domainNotAllowed('other.example')],
  404: [notFound()],
  409: [slugTaken('go.brand.com', 'summer')],
  413: [payloadTooLarge(BODY_LIMIT)],
  415: [unsupportedMediaType()],
  429: [tooManyRequests('Too many requests with a bad API token; wait and try again', 42)],
  500: [internal()],
  503: [unavailable()],
}

/**
 * Error responses, documented as what they are on the wire: application/problem+json. Fastify picks the
 * serializer by the reply's content type, which sendProblem (src/plugins/errors.ts) sets to this one.
 */
export const problemResponses = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: problemDescriptions[status],
        ...(status === 429
          ? { headers: { 'Retry-After': Type.Integer({ minimum: 1, description: 'Seconds to wait before trying again' }) } }
          : {}),
        content: {
          [PROBLEM_MEDIA_TYPE]: {
            schema: Type.Ref(Problem),
            examples: Object.fromEntries(problemExamples[status].map((error) => [error.code, { value: error.toProblem() }])),
          },
        },
      },
    ]),
  )

/** A success answer: a shared schema (registered by $id) with the schema's own example. */
export const successResponse = (description: string, schema: TSchema & { examples?: unknown[] }) => ({
  description,
  content: { 'application/json': { schema: Type.Ref(schema), example: schema.examples?.[0] } },
})
