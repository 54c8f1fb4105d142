/**
 * GET /v1/links/{uniqId}/qr and GET /v1/links/by-domain/{domain}/{id}/qr: the QR code of a link of the token's
 * workspace (another workspace's link is a 404, like one that does not exist). A read: no write quota counts it.
 * The public form, on the short domains, is qr-public-route.ts.
 */
import { Type } from '@sinclair/typebox'
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { DomainSlugParams, UniqIdParams } from '../../schemas/link.js'
import { QrQuery } from '../../schemas/qr.js'
import { fieldError } from '../errors/app-error.js'
import { findLink, type LinkServiceContext } from '../links/link-service.js'
import { problemResponsesWith } from '../plugins/openapi-entity-responses.js'
import { MIN_CONTRAST, qrOptions } from './qr-code.js'
import { API_QR_CACHE_CONTROL, sendQr } from './qr-response.js'

const imageHeaders = {
  'Cache-Control': Type.String({ description: `\`${API_QR_CACHE_CONTROL}\``, examples: [API_QR_CACHE_CONTROL] }),
  ETag: Type.String({ description: 'Strong validator of the image; send it back in If-None-Match for a 304' }),
}

export const QR_RESPONSES = {
  200: {
    description: 'The QR code of the short address https://<domain>/<slug>: SVG by default, PNG with format=png',
    headers: imageHeaders,
    content: {
      'image/svg+xml': { schema: Type.String({ contentMediaType: 'image/svg+xml', description: 'An SVG document' }) },
      'image/png': { schema: Type.String({ contentMediaType: 'image/png', description: 'A PNG image' }) },
    },
  },
  304: { description: 'Not modified: the If-None-Match named this very image', headers: imageHeaders, type: 'null' },
  ...problemResponsesWith(
    {
      400: {
        description:
          'validation_failed: a bad parameter, named by its pointer (/uniqId, /domain, /id, /size, /margin, /level, /color, ' +
          `/background, /format); colours with less than ${MIN_CONTRAST}:1 contrast (both named); a size that gives a ` +
          'module less than a pixel (/size)',
        examples: [fieldError('/size', 'must be <= 2048')],
      },
    },
    401, 404, 429, 500, 503,
  ),
}

export default async function qrRoutes(app: FastifyInstance, options: { links: LinkServiceContext }) {
  const api = app.withTypeProvider<TypeBoxTypeProvider>()
  const common = { tags: ['links'], security: [{ apiToken: [] }], querystring: QrQuery, response: QR_RESPONSES }
  const description =
    'SVG (default) or PNG of `https://<domain>/<slug>`, the slug as it was given. The same image is public at ' +
    '`https://<domain>/<slug>/qr` with the same parameters. A read: the write quotas do not count it.'

  api.get(
    '/v1/links/:uniqId/qr',
    {
      onRequest: [app.authenticate],
      schema: { ...common, operationId: 'getLinkQr', summary: "The QR code of a link's short address", description, params: UniqIdParams },
    },
    async (request, reply) => {
      const qr = qrOptions(request.query)
      const link = await findLink(options.links, request.caller, { uniq: request.params.uniqId })
      return sendQr(request, reply, `https://${link.domain}/${link.slug}`, qr, API_QR_CACHE_CONTROL)
    },
  )

  api.get(
    '/v1/links/by-domain/:domain/:id/qr',
    {
      onRequest: [app.authenticate],
      schema: {
        ...common,
        operationId: 'getLinkQrByDomain',
        summary: "The QR code of a link's short address, by its domain and slug",
        description: `${description} The slug is matched regardless of case.`,
        params: DomainSlugParams,
      },
    },
    async (request, reply) => {
      const qr = qrOptions(request.query)
      const { domain, id } = request.params
      const link = await findLink(options.links, request.caller, { domain, slug: id })
      return sendQr(request, reply, `https://${link.domain}/${link.slug}`, qr, API_QR_CACHE_CONTROL)
    },
  )
}
