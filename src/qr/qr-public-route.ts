/**
 * GET /<slug>/qr on a short domain: the link's QR code, public (people print it; the address it holds is on the
 * page anyway). Registered from the visitor routes' scope (src/redirects/redirect-routes.ts), so it shares their
 * quiet logger (no line per request below `warn`) and host rules: on another host it is the API's 404, and an
 * unknown slug is the visitors' 404 page. Fetching a code is no visit: nothing is counted or recorded.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { LIMITS } from '../../schemas/link.js'
import { QrQuery, type QrRequest } from '../../schemas/qr.js'
import { notFoundPage } from '../redirects/pages/index.js'
import { sendPage } from '../redirects/respond.js'
import { qrOptions } from './qr-code.js'
import { PUBLIC_QR_CACHE_CONTROL, sendQr } from './qr-response.js'
import { VISITOR_PRESSURE } from '../plugins/overload.js'

const SLUG = new RegExp(`^[A-Za-z0-9_-]{1,${LIMITS.slug}}$`)

export interface VisitorHost {
  /** The request's host when it is a short domain, else null. */
  shortHost(request: FastifyRequest): string | null
  /** The answer on any other host: the API's problem+json 404. */
  notARoute(reply: FastifyReply): FastifyReply
}

export function publicQrRoute(app: FastifyInstance, { shortHost, notARoute }: VisitorHost): void {
  app.get<{ Params: { slug: string }; Querystring: QrRequest }>(
    '/:slug/qr',
    {
      logLevel: 'warn',
      schema: { hide: true, querystring: QrQuery },
      config: VISITOR_PRESSURE,
      // Before the query is validated: on a host that is no short domain this path does not exist.
      onRequest: async (request, reply) => {
        if (shortHost(request) === null) return notARoute(reply)
      },
    },
    async (request, reply) => {
      const qr = qrOptions(request.query)
      const { slug } = request.params
      const view = SLUG.test(slug) ? await app.redirects.lookup(shortHost(request)!, slug) : null
      if (view === null) return sendPage(reply, notFoundPage())
      return sendQr(request, reply, `https://${view.domain}/${view.slug}`, qr, PUBLIC_QR_CACHE_CONTROL)
    },
  )
}
