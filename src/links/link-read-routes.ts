import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { DomainSlugParams, LinkRecord, UniqIdParams } from '../../schemas/link.js'
import { LinkList, ListLinksQuery } from '../../schemas/link-list.js'
import { fieldError } from '../errors/app-error.js'
import { noContentResponse, problemResponsesWith, reservedLinkWrite } from '../plugins/openapi-entity-responses.js'
import { successResponse } from '../plugins/openapi-responses.js'
import { deleteLink, listLinks } from './link-read-service.js'
import { linkRecord, linkRecords } from './link-record.js'
import { findLink, type LinkServiceContext } from './link-service.js'
import { NOT_DECIMAL_MESSAGE } from '../../schemas/formats.js'

const badUniqId = {
  description: 'validation_failed: uniqId is not a whole number from 1 to 2147483647 in plain decimal',
  examples: [fieldError('/uniqId', NOT_DECIMAL_MESSAGE)],
}

/** Read, list and delete links: the rest of link management beside create and update (link-routes.ts). */
export default async function linkReadRoutes(app: FastifyInstance, options: { links: LinkServiceContext }) {
  const api = app.withTypeProvider<TypeBoxTypeProvider>()
  const onRequest = [app.authenticate]
  const common = { tags: ['links'], security: [{ apiToken: [] }] }

  api.get(
    '/v1/links',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'listLinks',
        summary: 'List links, newest first',
        description:
          "A page of the workspace's links, newest first, narrowed by the filters given (all of them must match). " +
          'Pass the answer\'s nextCursor as cursor for the next page, with the same filters.',
        querystring: ListLinksQuery,
        response: {
          200: successResponse('A page of links', LinkList),
          ...problemResponsesWith(
            {
              400: {
                description: 'validation_failed: a bad filter, limit or cursor, named by its pointer (/limit, /cursor, …)',
                examples: [fieldError('/cursor', 'is not the nextCursor of a page of this list')],
              },
            },
            401, 429, 500, 503,
          ),
        },
      },
    },
    async (request) => {
      const page = await listLinks(options.links, request.caller, request.query)
      return { links: await linkRecords(options.links.database, page.links), nextCursor: page.nextCursor }
    },
  )

  api.get(
    '/v1/links/:uniqId',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'getLink',
        summary: 'Get a link by its uniq',
        description: "The link record, as create and update answer it. A link of another workspace is a 404.",
        params: UniqIdParams,
        response: {
          200: successResponse('The link', LinkRecord),
          ...problemResponsesWith({ 400: badUniqId }, 401, 404, 429, 500, 503),
        },
      },
    },
    async (request) => linkRecord(options.links.database, await findLink(options.links, request.caller, { uniq: request.params.uniqId })),
  )

  api.get(
    '/v1/links/by-domain/:domain/:id',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'getLinkByDomain',
        summary: 'Get a link by its domain and slug',
        description: 'The slug is matched regardless of case.',
        params: DomainSlugParams,
        response: { 200: successResponse('The link', LinkRecord), ...problemResponsesWith({}, 401, 404, 429, 500, 503) },
      },
    },
    async (request) => {
      const { domain, id } = request.params
      return linkRecord(options.links.database, await findLink(options.links, request.caller, { domain, slug: id }))
    },
  )

  const deleted = noContentResponse('Deleted: the address no longer redirects and the slug can be used again')

  api.delete(
    '/v1/links/:uniqId',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'deleteLink',
        summary: 'Delete a link by its uniq',
        description: 'Deletes the link: its short address no longer redirects and its slug can be used again.',
        params: UniqIdParams,
        response: { 204: deleted, ...problemResponsesWith({ 400: badUniqId, 403: reservedLinkWrite }, 401, 404, 429, 500, 503) },
      },
    },
    async (request, reply) => {
      await deleteLink(options.links, request.caller, { uniq: request.params.uniqId })
      return reply.code(204).send()
    },
  )

  api.delete(
    '/v1/links/by-domain/:domain/:id',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'deleteLinkByDomain',
        summary: 'Delete a link by its domain and slug',
        description: 'The slug is matched regardless of case.',
        params: DomainSlugParams,
        response: { 204: deleted, ...problemResponsesWith({ 403: reservedLinkWrite }, 401, 404, 429, 500, 503) },
      },
    },
    async (request, reply) => {
      const { domain, id } = request.params
      await deleteLink(options.links, request.caller, { domain, slug: id })
      return reply.code(204).send()
    },
  )
}
