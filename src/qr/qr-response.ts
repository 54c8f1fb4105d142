/**
 * How both QR routes answer: the image with its type, Cache-Control and a strong ETag, or a 304 when the client
 * (or a cache in between) already has that image, which then is not drawn at all. A code that cannot be drawn
 * at the size asked is a 400 before either, so neither a cache nor If-None-Match can turn it into a 304.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { drawQr, encodeQr, qrEtag, type QrOptions } from './qr-code.js'
import type { DrawBudget } from './draw-budget.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The time both QR routes may spend drawing (draw-budget.ts). */
    qrDrawing: DrawBudget
  }
}

/**
 * The public route's images may be kept by browsers and CDNs for 5 minutes: a link's domain and slug never
 * change, so the image of an address is always the same, but a link can be deleted, and its code should not
 * outlive it by much. The API's answers are `private`: they were asked for with a token that a shared cache
 * would not know to key on (it is no `Authorization` header).
 */
export const PUBLIC_QR_CACHE_CONTROL = 'public, max-age=300'
export const API_QR_CACHE_CONTROL = 'private, max-age=300'

/** An SVG opened by itself is a document of the short domain: it has no script, and may load nothing. */
const IMAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'"

/** If-None-Match compares weakly (RFC 9110 13.1.2): `W/"x"` matches `"x"`; `*` matches any image. */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false
  return ifNoneMatch.split(',').some((tag) => {
    const trimmed = tag.trim()
    return trimmed === '*' || trimmed.replace(/^W\//, '') === etag
  })
}

/**
 * The QR code of `shortUrl`, drawn as `options` say (a 400 from encodeQr when it cannot be, at that size; a 503
 * when the drawing budget of this second is spent).
 */
export function sendQr(request: FastifyRequest, reply: FastifyReply, shortUrl: string, options: QrOptions, cacheControl: string) {
  const matrix = encodeQr(shortUrl, options)
  const etag = qrEtag(shortUrl, options)
  if (matches(request.headers['if-none-match'], etag)) return reply.code(304).header('cache-control', cacheControl).header('etag', etag).send()
  // Drawn before the image's headers are set: a 503 of a spent budget must not be kept by a cache as the image.
  const image = request.server.qrDrawing.run(() => drawQr(matrix, options))
  return reply
    .header('cache-control', cacheControl)
    .header('etag', etag)
    .type(image.contentType)
    .header('content-security-policy', IMAGE_CSP)
    .header('x-content-type-options', 'nosniff')
    .send(image.body)
}
