/**
 * Click analytics (issue 11): stats of a link and of the workspace, and a link's raw visits. Read-only: no
 * quota operation is declared, so the create and update quotas never count these requests.
 */
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { DomainSlugParams, UniqIdParams } from '../../schemas/link.js'
import { NOT_DECIMAL_MESSAGE } from '../../schemas/formats.js'
import { LinkStats, StatsQuery, VisitList, VisitsQuery, WorkspaceStats, WorkspaceStatsQuery } from '../../schemas/stats.js'
import { fieldError } from '../errors/app-error.js'
import { findLink, type LinkServiceContext } from '../links/link-service.js'
import { problemResponsesWith } from '../plugins/openapi-entity-responses.js'
import { successResponse } from '../plugins/openapi-responses.js'
import { listVisits } from './stats-visits.js'
import { retentionStart } from './partitions.js'
import { linkStats, workspaceStats, type StatsContext } from './stats-service.js'

const badQuery = {
  description:
    'validation_failed: a bad from, to, timezone, interval or limit, named by its pointer; from not before to, ' +
    'a range over 400 days, or more than 1,000 buckets (/interval)',
  examples: [fieldError('/timezone', 'must be an IANA time zone name, such as Europe/Paris or UTC')],
}

export default async function statsRoutes(app: FastifyInstance, options: { links: LinkServiceContext; now?: () => Date }) {
  const api = app.withTypeProvider<TypeBoxTypeProvider>()
  const onRequest = [app.authenticate]
  const common = { tags: ['stats'], security: [{ apiToken: [] }] }
  const context: StatsContext = { prisma: options.links.prisma, config: options.links.config, now: options.now }
  const linkStatsDescription =
    'Clicks (bots excluded), unique visitors and bots over [from, to) in whole hours, as a series of buckets ' +
    "aligned to the time zone's midnight, Monday or first of the month, and the top countries, referrers, devices, " +
    'operating systems, browsers and destinations.'

  api.get(
    '/v1/links/:uniqId/stats',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'getLinkStats',
        summary: "A link's stats by its uniq",
        description: linkStatsDescription,
        params: UniqIdParams,
        querystring: StatsQuery,
        response: {
          200: successResponse("The link's stats", LinkStats),
          ...problemResponsesWith({ 400: badQuery }, 401, 404, 429, 500, 503),
        },
      },
    },
    async (request) => {
      const link = await findLink(options.links, request.caller, { uniq: request.params.uniqId })
      return linkStats(context, link, request.query)
    },
  )

  api.get(
    '/v1/links/by-domain/:domain/:id/stats',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'getLinkStatsByDomain',
        summary: "A link's stats by its domain and slug",
        description: `${linkStatsDescription} The slug is matched regardless of case.`,
        params: DomainSlugParams,
        querystring: StatsQuery,
        response: {
          200: successResponse("The link's stats", LinkStats),
          ...problemResponsesWith({ 400: badQuery }, 401, 404, 429, 500, 503),
        },
      },
    },
    async (request) => {
      const { domain, id } = request.params
      const link = await findLink(options.links, request.caller, { domain, slug: id })
      return linkStats(context, link, request.query)
    },
  )

  api.get(
    '/v1/stats',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'getWorkspaceStats',
        summary: "The workspace's stats",
        description:
          `The same as a link's stats for all the workspace's links, or those on one domain, plus the top links. ` +
          'With tag or folderId, the visits of the links that match now, from before they matched too; a visitor ' +
          'of two of them on one day counts twice. One tag or one folder (with or without domain) is read from ' +
          'its own aggregates; two tags, or a tag and a folder, sum the matching links one by one (slower).',
        querystring: WorkspaceStatsQuery,
        response: {
          200: successResponse("The workspace's stats", WorkspaceStats),
          ...problemResponsesWith(
            { 400: { ...badQuery, description: `${badQuery.description}; a domain that is not the workspace's (/domain)` } },
            401, 429, 500, 503,
          ),
        },
      },
    },
    async (request) => workspaceStats(context, request.caller, request.query),
  )

  api.get(
    '/v1/links/:uniqId/visits',
    {
      onRequest,
      schema: {
        ...common,
        operationId: 'listLinkVisits',
        summary: "A link's visits, newest first",
        description:
          'The raw visits (kept VISIT_RETENTION_DAYS), in pages: pass the answer\'s nextCursor as cursor for the ' +
          'next page, with the same from and to.',
        params: UniqIdParams,
        querystring: VisitsQuery,
        response: {
          200: successResponse('A page of visits', VisitList),
          ...problemResponsesWith(
            {
              400: {
                description: 'validation_failed: a bad uniqId, limit, cursor, from or to, named by its pointer',
                examples: [fieldError('/uniqId', NOT_DECIMAL_MESSAGE)],
              },
            },
            401, 404, 429, 500, 503,
          ),
        },
      },
    },
    async (request) => {
      const link = await findLink(options.links, request.caller, { uniq: request.params.uniqId })
      const now = options.now?.() ?? new Date()
      return listVisits(options.links.prisma, link.uniq, request.query, retentionStart(now, options.links.config.visitRetentionDays))
    },
  )
}
