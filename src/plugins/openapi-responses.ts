/** How responses are documented in the OpenAPI document, shared by every route module. */
import { Type, type TSchema } from '@sinclair/typebox'
import { StringEnum } from '../../schemas/enum.js'
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
  quotaExceeded,
  redirectLoop,
  slugReserved,
  slugTaken,
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
  429:
    "rate_limited: the workspace's hour or day quota for this operation is used up (or too many bad tokens came " +
    'from this address); Retry-After says when to try again',
  500: 'internal',
  503:
    'unavailable: the database cannot be reached or is too busy to answer in time (or Redis, under ' +
    'RATE_LIMIT_ON_REDIS_ERROR=deny), the instance is overloaded (its event loop or database pool is saturated: it ' +
    'refuses at once rather than queue the request), or the service is restarting; Retry-After says when to try again',
}

/** Examples of each error a status carries, made by the constructors the service throws (nothing written twice). */
const problemExamples: Record<number, AppError[]> = {
  400: [
    fieldError('/link/url', formatMessages['http-url']),
    invalidJson('Unexpected end of JSON input'),
    redirectLoop({ path: '/link/url', host: 'go.brand.com' }),
    slugReserved('docs'),
  ],
  401: [unauthorized()],
  403: [domainReserved('short.example'), domainNotAllowed('other.example')],
  404: [notFound()],
  409: [slugTaken('go.brand.com', 'summer')],
  413: [payloadTooLarge(BODY_LIMIT)],
  415: [unsupportedMediaType()],
  429: [quotaExceeded('create', { name: 'hour', limit: 1000, seconds: 3600 }, 42)],
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
        ...(status === 429 || status === 503
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

/** What autofill did (contract section 12), on every successful create and update. */
export const AUTOFILL_HEADER = {
  'X-Autofill': StringEnum(
    ['filled', 'partial', 'failed', 'skipped'],
    {
      description:
        '`filled`: every empty title/description/image/favicon was filled from the page; `partial`: some were ' +
        '(the page lacked the others); `failed`: the page could not be fetched or parsed, the link is stored as ' +
        'given; `skipped`: autofill was false, nothing was empty, or the update changed nothing.',
    },
  ),
}

/** The quota headers of contract section 8 (src/plugins/rate-limits.ts). */
export const QUOTA_HEADERS = {
  'RateLimit-Policy': Type.String({
    description: "The workspace's quotas for this operation, e.g. `\"hour\";q=1000;w=3600, \"day\";q=10000;w=86400`",
  }),
  RateLimit: Type.String({
    description:
      'The tighter window (fewer requests remaining): `"<window>";r=<remaining>;t=<seconds until a slot frees>`, ' +
      'e.g. `"hour";r=998;t=3597`',
  }),
  'X-RateLimit-Limit': Type.Integer({ minimum: 0, description: 'The quota of the tighter window' }),
  'X-RateLimit-Remaining': Type.Integer({ minimum: 0, description: 'Requests left in the tighter window' }),
  'X-RateLimit-Reset': Type.Integer({
    minimum: 0,
    description: 'Seconds until the tighter window frees a slot (0 when it counts nothing)',
  }),
}

/**
 * The answers of a quota-limited route, each with the quota headers, except 401 (no workspace to count
 * for). They are absent too when the quota store cannot be reached (RATE_LIMIT_ON_REDIS_ERROR=allow).
 */
export function withQuotaHeaders<T extends Record<number, object>>(responses: T): T {
  return Object.fromEntries(
    Object.entries(responses).map(([status, response]: [string, { headers?: Record<string, TSchema> }]) => [
      status,
      status === '401' ? response : { ...response, headers: { ...QUOTA_HEADERS, ...response.headers } },
    ]),
  ) as T
}
