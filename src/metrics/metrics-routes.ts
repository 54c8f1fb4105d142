/**
 * GET /metrics: the Prometheus text exposition of src/plugins/metrics.ts, with the service's counters read at
 * scrape time (service-metrics.ts). It answers on every host (a static route, which the router prefers to the
 * visitors' `/:slug`, and `metrics` is a reserved slug) and whatever the load (src/plugins/overload.ts). No
 * token unless METRICS_TOKEN is set, then `Authorization: Bearer <token>`; either way it is meant for the
 * scraper on the private network, not the internet: it tells traffic, routes and internals.
 */
import { Type } from '@sinclair/typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { createHash, timingSafeEqual } from 'node:crypto'
import { metricsUnauthorized } from '../errors/app-error.js'
import { METRICS_PATH } from '../plugins/metrics.js'
import { problemResponsesWith } from '../plugins/openapi-entity-responses.js'
import { ALWAYS_ANSWERED } from '../plugins/overload.js'
import { registerServiceMetrics } from './service-metrics.js'

const sha256 = (text: string) => createHash('sha256').update(text).digest()

/** The credentials of `Authorization: Bearer <token>`; the scheme's name is case-insensitive (RFC 9110 11.1). */
function bearerToken(header: string | undefined): string | undefined {
  return header === undefined ? undefined : /^\s*bearer\s+(\S+)\s*$/i.exec(header)?.[1]
}

export default async function metricsRoutes(app: FastifyInstance, options: { metricsToken?: string }) {
  registerServiceMetrics(app.metrics.registry, app, app.overload)

  const expected = options.metricsToken === undefined ? undefined : sha256(options.metricsToken)
  // Digests of equal length, compared in constant time.
  const authorized = (request: FastifyRequest) =>
    !expected || timingSafeEqual(sha256(bearerToken(request.headers.authorization) ?? ''), expected)

  app.get(
    METRICS_PATH,
    {
      config: ALWAYS_ANSWERED,
      schema: {
        tags: ['health'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics of this instance',
        description:
          'The Prometheus text format (0.0.4): requests by route and status with their latency, visits by answer, the ' +
          'redirect cache, rate-limit refusals, autofill, the visit buffer, the database pools, Redis, overload refusals ' +
          'and the process (see the README, "Monitoring"). No API token; when the service has METRICS_TOKEN set, ' +
          '`Authorization: Bearer <METRICS_TOKEN>`. Keep it off the internet. Answered even when the instance is overloaded.',
        // No credentials, or METRICS_TOKEN as a bearer token when the service has one set.
        security: [{}, { metricsToken: [] }],
        response: {
          200: {
            description: 'The metrics',
            content: { 'text/plain; version=0.0.4': { schema: Type.String({ description: 'Prometheus text exposition format 0.0.4' }) } },
          },
          ...problemResponsesWith({
            401: {
              description: 'unauthorized: METRICS_TOKEN is set and the Authorization header does not carry it',
              examples: [metricsUnauthorized()],
              headers: { 'WWW-Authenticate': Type.String({ description: '`Bearer realm="metrics"`' }) },
            },
          }),
        },
      },
    },
    async (request, reply) => {
      if (!authorized(request)) throw metricsUnauthorized()
      return reply.type(app.metrics.contentType).send(await app.metrics.scrape())
    },
  )
}
