import { isUtf8 } from 'node:buffer'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { invalidJson, unsupportedMediaType, type AppError } from '../errors/app-error.js'
import { timesSent } from './raw-headers.js'

const CHARSET_PARAMETER = /;\s*charset\s*=/gi

/** `charset=utf-8` (any case, quoted or not; `utf8` is the WHATWG label's alias), or no charset at all. */
function charsetOf(contentType: string): string | undefined {
  const match = /;\s*charset\s*=\s*("([^"]*)"|[^;\s]*)/i.exec(contentType)
  return match ? (match[2] ?? match[1]).trim().toLowerCase() : undefined
}

/**
 * What makes a JSON body unreadable before a byte of it is read: a charset other than UTF-8 (the service
 * would store its accented letters mangled), or a Content-Encoding (Fastify does not decode any, so a
 * gzipped body would be read as garbage). Bodies are at most 64 KiB: compression is not supported at all,
 * which also keeps decompression bombs out.
 */
function unreadableBody(request: FastifyRequest): AppError | undefined {
  // Node reads the first of several; a proxy in front may have read another.
  if (timesSent(request.raw.rawHeaders, 'content-type') > 1) return unsupportedMediaType('Send Content-Type once')
  const contentType = request.headers['content-type'] ?? ''
  if ((contentType.match(CHARSET_PARAMETER) ?? []).length > 1) return unsupportedMediaType('Give the charset once')
  const charset = charsetOf(contentType)
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return unsupportedMediaType(`The body must be JSON in UTF-8; charset=${charset} is not supported`)
  }
  const encoding = request.headers['content-encoding']?.trim().toLowerCase()
  if (encoding && encoding !== 'identity') {
    return unsupportedMediaType(`Content-Encoding: ${encoding} is not supported; send the body uncompressed`)
  }
  return undefined
}

/** 415 for a POST or PUT that does not say it sends JSON in UTF-8, before Fastify looks at the body. */
export async function requireJsonBody(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
  if (!/^application\/json\s*(;|$)/i.test(request.headers['content-type'] ?? '')) throw unsupportedMediaType()
  const unreadable = unreadableBody(request)
  if (unreadable) throw unreadable
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON body's bytes as they arrived (null without a body): what an Idempotency-Key fingerprints. */
    bodyBytes: Buffer | null
  }
}

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH'])

/**
 * Bodies are JSON only (Fastify would also take text/plain), in UTF-8. Some HTTP clients send
 * `Content-Type: application/json` on every request, a DELETE or GET with no body included: that empty
 * body means "no body" there, not malformed JSON.
 *
 * The bytes are checked before decoding: decoding invalid UTF-8 as text replaces it with U+FFFD, which would
 * then be stored. `JSON.parse` keeps a `__proto__` member as plain data (an own property); the checks of
 * src/plugins/client-data.ts then refuse it by name, before anything reads the body, where Fastify's parser
 * would only say "not valid JSON".
 */
export default fp(async function jsonBody(app: FastifyInstance) {
  app.removeContentTypeParser('text/plain')
  app.removeContentTypeParser('application/json')
  app.decorateRequest('bodyBytes', null)
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer
    request.bodyBytes = bytes
    const unreadable = unreadableBody(request)
    if (unreadable) return done(unreadable)
    if (bytes.length === 0) {
      return METHODS_WITH_BODY.has(request.method) ? done(invalidJson('the body is empty')) : done(null, undefined)
    }
    if (!isUtf8(bytes)) return done(invalidJson('it is not valid UTF-8'))
    let text = bytes.toString('utf8')
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    try {
      return done(null, JSON.parse(text))
    } catch (error) {
      return done(invalidJson((error as Error).message))
    }
  })
})
