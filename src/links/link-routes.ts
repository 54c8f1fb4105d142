import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { AutofillResult } from '../autofill/autofill.js'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import {
  CreateLinkBody,
  DomainSlugParams,
  LinkRecord,
  UniqIdParams,
  UpdateLinkBody,
} from '../../schemas/link.js'
import { requireJsonBody } from '../plugins/json-body.js'
import { AUTOFILL_HEADER, problemResponses, successResponse, withQuotaHeaders } from '../plugins/openapi-responses.js'
import { problemResponse, reservedLinkWrite } from '../plugins/openapi-entity-responses.js'
import { IDEMPOTENCY_KEY_NOTE, IdempotencyKeyHeaders, withIdempotencyAnswers } from '../plugins/openapi-idempotency.js'
import { createLink, updateLinkFields, type LinkServiceContext } from './link-service.js'
import { BulkCreateBody, BulkCreateResult } from '../../schemas/link-bulk.js'
import { compileBodyValidator } from '../plugins/validation.js'
import { bulkItemKey, createLinks, type BulkIdempotency, type InPlace } from './link-bulk.js'
import { bulkSlots, type BulkSlotOptions } from './bulk-slots.js'
import { linkRecord, toLinkRecord } from './link-record.js'
import { findIdempotentCreates } from './link-repository.js'
import { isDatabaseUnavailable, OutcomeUnknownError } from '../db/errors.js'
import { bulkOutcomeUnknown, idempotencyKeyReused, keyedCreateOutcomeUnknown } from '../errors/idempotency-errors.js'
import { REPLAYED_HEADER } from '../idempotency/replay.js'

/** The most links of a bulk create, so the most `key<TAB>index` rows its Idempotency-Key can have. */
const BULK_MAX_LINKS = BulkCreateBody.properties.links.maxItems ?? 100

export default async function linkRoutes(app: FastifyInstance, options: { links: LinkServiceContext; bulk?: BulkSlotOptions }) {
  const api = app.withTypeProvider<TypeBoxTypeProvider>()
  const security = [{ apiToken: [] }]
  const onRequest = [app.authenticate, requireJsonBody]
  const admit = (request: FastifyRequest) => () => app.quotas.admit(request)
  // Idempotency-Key is claimed before the schema and the quota (preValidation) and its answer kept last (onSend).
  const createQuota = app.quotas.routeHooks('create')
  const idempotent = (operation: string) => app.idempotency.routeHooks(operation)
  const createHooks = idempotent('createLink')
  const bulkHooks = idempotent('createLinks')
  const bulkPlaces = bulkSlots(options.bulk)
  app.onClosing(() => bulkPlaces.close())
  const updateDoc = {
    tags: ['links'],
    security,
    body: UpdateLinkBody,
    response: withQuotaHeaders({
      200: { ...successResponse('The link after the merge', LinkRecord), headers: AUTOFILL_HEADER },
      ...problemResponses(400, 401, 404, 413, 415, 429, 500, 503),
      403: problemResponse(reservedLinkWrite),
    }),
  }

  api.post(
    '/v1/links/create',
    {
      onRequest,
      preValidation: createHooks.preValidation,
      preHandler: createQuota.preHandler,
      onSend: [createQuota.onSend, createHooks.onSend].filter((hook) => hook !== undefined),
      onResponse: createHooks.onResponse,
      schema: {
        operationId: 'createLink',
        summary: 'Create a short link',
        description:
          'Creates a link on `domain` (default: the workspace default domain, else the service default) at `id` ' +
          `(default: 7 random characters). Answers the stored link. ${IDEMPOTENCY_KEY_NOTE}`,
        tags: ['links'],
        security,
        headers: IdempotencyKeyHeaders,
        body: CreateLinkBody,
        response: withQuotaHeaders(withIdempotencyAnswers({
          201: {
            ...successResponse('The stored link', LinkRecord),
            headers: {
              Location: Type.String({ description: 'Where to GET the link: /v1/links/{uniq}', examples: ['/v1/links/42'] }),
              ...AUTOFILL_HEADER,
            },
          },
          ...problemResponses(400, 401, 403, 409, 413, 415, 429, 500, 503),
        })),
      },
    },
    async (request, reply) => {
      const claim = request.idempotencyClaim
      if (claim) {
        // An instance that ran this request before may have stored the link and died before keeping the answer:
        // the link is answered, not made twice (its record as it is now; a replay takes no quota). The rows a bulk
        // create with this key would have stored (`key<TAB>index`) are read too: the key used by the other
        // operation is refused (422) even once the key store has forgotten it.
        const since = new Date(app.idempotency.now() - app.idempotency.answerTtlMs)
        const keys = [claim.scope.key, ...Array.from({ length: BULK_MAX_LINKS }, (_, index) => bulkItemKey(claim.scope.key, index))]
        const found = await findIdempotentCreates(options.links.database, request.caller.workspaceId, keys, since)
        const earlier = found.get(claim.scope.key)
        if ([...found.values()].some((stored) => stored.fingerprint !== claim.fingerprint)) {
          // The key stays the first request's: its own retry must still find its link.
          await app.idempotency.release(request)
          throw idempotencyKeyReused()
        }
        if (earlier) {
          request.log.info({ uniq: earlier.link.uniq }, 'idempotency key: the link an earlier attempt stored is answered')
          app.quotas.release(request)
          return reply.code(201).header('location', `/v1/links/${earlier.link.uniq}`).header('x-autofill', earlier.autofill)
            .header(REPLAYED_HEADER, 'true').send(toLinkRecord(earlier.link, earlier.link.clicks ?? 0))
        }
      }
      const idempotency = claim ? { key: claim.scope.key, fingerprint: claim.fingerprint, at: new Date(app.idempotency.now()) } : undefined
      const { link, autofill } = await createLink(options.links, request.caller, request.body, admit(request), idempotency).catch((error: unknown) => {
        if (!(error instanceof OutcomeUnknownError)) throw error
        // The link may be stored: its slot stays taken (a retry with the key answers it without taking one).
        app.quotas.keep(request)
        throw claim ? keyedCreateOutcomeUnknown() : error
      })
      reportAutofill(request, reply, link.url, autofill)
      return reply.code(201).header('location', `/v1/links/${link.uniq}`).send(toLinkRecord(link, 0))
    },
  )

  // The body's envelope is checked here (1 to 100 links, autofill a boolean); each link is checked on its own
  // by createLinks, so that a bad one is answered in its place instead of failing the request.
  const bulkEnvelope = compileBodyValidator(
    Type.Object({ links: Type.Array(Type.Unknown(), { minItems: 1, maxItems: BulkCreateBody.properties.links.maxItems }), autofill: Type.Optional(Type.Boolean()) }),
  )
  api.post(
    '/v1/links/bulk',
    {
      onRequest,
      config: { bodyItems: 'links' },
      preValidation: bulkHooks.preValidation,
      onSend: [createQuota.onSend, bulkHooks.onSend].filter((hook) => hook !== undefined),
      onResponse: bulkHooks.onResponse,
      validatorCompiler: ({ httpPart }) => (httpPart === 'body' ? bulkEnvelope : () => true),
      schema: {
        operationId: 'createLinks',
        summary: 'Create up to 100 short links at once',
        description:
          'Creates each link of `links` as createLink would, and answers 200 with one result per link, in order: ' +
          '`{status: 201, link}` or `{status, problem}` (field errors named `/links/<index>/<field>`). A failing ' +
          'link never fails the others. Each created link counts against the create quota; a batch larger than ' +
          'what is left creates the links that fit and answers `rate_limited` (429) for the rest. The request ' +
          'itself fails only when it cannot be read (400 for a body that is not 1 to 100 links, 401, 413, 415), is refused ' +
          '(429 after too many bad tokens) or ' +
          'the service cannot serve it (500, 503; 503 with Retry-After too when the instance is already working on as many ' +
          `bulk creates as it takes and others wait). ${IDEMPOTENCY_KEY_NOTE}`,
        tags: ['links'],
        security,
        headers: IdempotencyKeyHeaders,
        body: BulkCreateBody,
        response: withQuotaHeaders(withIdempotencyAnswers({
          200: successResponse('The result of each link, in the order of the request', BulkCreateResult),
          ...problemResponses(400, 401, 413, 415, 429, 500, 503),
        })),
      },
    },
    async (request, reply) => {
      const claim = request.idempotencyClaim
      let idempotency: BulkIdempotency | undefined
      if (claim) {
        // An attempt with this key that was never answered (its connection lost, its instance dead) may have
        // stored some of the links: those are answered, the others created now.
        const since = new Date(app.idempotency.now() - app.idempotency.answerTtlMs)
        const keys = request.body.links.map((_, index) => bulkItemKey(claim.scope.key, index))
        // With the row of a single create with this key: the key used by the other operation is refused (422).
        const found = await findIdempotentCreates(options.links.database, request.caller.workspaceId, [...keys, claim.scope.key], since)
        if ([...found.values()].some((earlier) => earlier.fingerprint !== claim.fingerprint)) {
          // The key stays the first request's: its own retry must still find its links.
          await app.idempotency.release(request)
          throw idempotencyKeyReused()
        }
        const earlier = new Map(keys.flatMap((key, index) => (found.has(key) ? [[index, found.get(key)!.link] as const] : [])))
        if (earlier.size > 0) request.log.info({ links: earlier.size }, 'idempotency key: the links an earlier attempt stored are answered')
        idempotency = { key: claim.scope.key, fingerprint: claim.fingerprint, at: new Date(app.idempotency.now()), earlier }
      }
      // The links are stored in one of the instance's places for bulk creates (bulk-slots.ts): once they are checked
      // and filled, the quota taken.
      const inPlace: InPlace = (work) => bulkPlaces.run(request, reply, work)
      const results = await createLinks(
        options.links, request.caller, request.body, (count) => app.quotas.reserveMany(request, 'create', count), idempotency, inPlace,
      ).catch((error: unknown) => {
        if (!(error instanceof OutcomeUnknownError)) throw error
        // The answer says only that some links may be stored: what failed goes to the log, as an error unless the
        // database was out of reach (a 503's warning).
        if (isDatabaseUnavailable(error.cause)) request.log.warn({ err: error.cause }, 'bulk create: the database failed with links stored')
        else request.log.error({ err: error.cause }, 'bulk create: failed with links stored')
        throw bulkOutcomeUnknown(idempotency !== undefined)
      })
      return {
        results: results.map((result) => ('link' in result ? { status: 201, link: toLinkRecord(result.link, result.link.clicks ?? 0) } : result)),
      }
    },
  )

  api.put(
    '/v1/links/:uniqId',
    {
      onRequest,
      ...app.quotas.routeHooks('update'),
      schema: {
        ...updateDoc,
        operationId: 'updateLink',
        summary: 'Update a link by its uniq',
        description: 'Merges the fields present in `link` into the stored link; see LinkPatch.',
        params: UniqIdParams,
      },
    },
    async (request, reply) => {
      const { link, autofill } = await updateLinkFields(
        options.links, request.caller, { uniq: request.params.uniqId }, request.body, admit(request),
      )
      reportAutofill(request, reply, link.url, autofill)
      return linkRecord(options.links.database, link)
    },
  )

  api.put(
    '/v1/links/by-domain/:domain/:id',
    {
      onRequest,
      ...app.quotas.routeHooks('update'),
      schema: {
        ...updateDoc,
        operationId: 'updateLinkByDomain',
        summary: 'Update a link by its domain and slug',
        description: 'Like updateLink; the slug is matched regardless of case. A 404 here is the cue to create.',
        params: DomainSlugParams,
      },
    },
    async (request, reply) => {
      const { domain, id } = request.params
      const { link, autofill } = await updateLinkFields(options.links, request.caller, { domain, slug: id }, request.body, admit(request))
      reportAutofill(request, reply, link.url, autofill)
      return linkRecord(options.links.database, link)
    },
  )
}

/** X-Autofill on the answer, and a log line when the page could not be used. */
function reportAutofill(request: FastifyRequest, reply: FastifyReply, url: string, autofill: AutofillResult): void {
  reply.header('x-autofill', autofill.status)
  if (autofill.status === 'failed') {
    // The address without its query: query strings can carry things that do not belong in logs.
    const { origin, pathname } = new URL(url)
    request.log.info({ autofill: { page: origin + pathname, reason: autofill.reason } }, 'autofill failed: the link is stored as given')
  }
}
