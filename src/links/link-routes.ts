import { Type } from '@sinclair/typebox'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import {
  CreateLinkBody,
  DomainSlugParams,
  LinkRecord,
  UniqIdParams,
  UpdateLinkBody,
} from '../../schemas/link.js'
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
import { BODY_LIMIT } from '../plugins/errors.js'
import { createLink, updateLinkFields, type LinkServiceContext } from './link-service.js'
import { toLinkRecord } from './link-record.js'

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
const problems = (...statuses: number[]) =>
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

/** The link record a successful create (201) or update (200) answers, with the record's own example. */
const linkRecordResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: Type.Ref(LinkRecord), example: LinkRecord.examples[0] } },
})

/** 415 for a POST or PUT that does not say it sends JSON, before Fastify looks at the body. */
export async function requireJsonBody(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
  if (!/^application\/json\s*(;|$)/i.test(request.headers['content-type'] ?? '')) throw unsupportedMediaType()
}

export default async function linkRoutes(app: FastifyInstance, options: { links: LinkServiceContext }) {
  const api = app.withTypeProvider<TypeBoxTypeProvider>()
  const security = [{ apiToken: [] }]
  const onRequest = [app.authenticate, requireJsonBody]
  const updateDoc = {
    tags: ['links'],
    security,
    body: UpdateLinkBody,
    response: { 200: linkRecordResponse('The link after the merge'), ...problems(400, 401, 404, 413, 415, 429, 500, 503) },
  }

  api.post(
    '/v1/links/create',
    {
      onRequest,
      schema: {
        operationId: 'createLink',
        summary: 'Create a short link',
        description:
          'Creates a link on `domain` (default: the workspace default domain, else the service default) at `id` ' +
          '(default: 7 random characters). Answers the stored link.',
        tags: ['links'],
        security,
        body: CreateLinkBody,
        response: { 201: linkRecordResponse('The stored link'), ...problems(400, 401, 403, 409, 413, 415, 429, 500, 503) },
      },
    },
    async (request, reply) => {
      const link = await createLink(options.links, request.caller, request.body)
      return reply.code(201).send(toLinkRecord(link))
    },
  )

  api.put(
    '/v1/links/:uniqId',
    {
      onRequest,
      schema: {
        ...updateDoc,
        operationId: 'updateLink',
        summary: 'Update a link by its uniq',
        description: 'Merges the fields present in `link` into the stored link; see LinkPatch.',
        params: UniqIdParams,
      },
    },
    async (request) => {
      const link = await updateLinkFields(options.links, request.caller, { uniq: request.params.uniqId }, request.body)
      return toLinkRecord(link)
    },
  )

  api.put(
    '/v1/links/by-domain/:domain/:id',
    {
      onRequest,
      schema: {
        ...updateDoc,
        operationId: 'updateLinkByDomain',
        summary: 'Update a link by its domain and slug',
        description: 'Like updateLink; the slug is matched regardless of case. A 404 here is the cue to create.',
        params: DomainSlugParams,
      },
    },
    async (request) => {
      const { domain, id } = request.params
      const link = await updateLinkFields(options.links, request.caller, { domain, slug: id }, request.body)
      return toLinkRecord(link)
    },
  )
}
