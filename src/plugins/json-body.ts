import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { unsupportedMediaType } from '../errors/app-error.js'

/** 415 for a POST or PUT that does not say it sends JSON, before Fastify looks at the body. */
export async function requireJsonBody(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
  if (!/^application\/json\s*(;|$)/i.test(request.headers['content-type'] ?? '')) throw unsupportedMediaType()
}

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH'])

/**
 * Bodies are JSON only (Fastify would also take text/plain). Some HTTP clients send
 * `Content-Type: application/json` on every request, a DELETE or GET with no body included: that empty
 * body means "no body" there, not malformed JSON.
 */
export default fp(async function jsonBody(app: FastifyInstance) {
  app.removeContentTypeParser('text/plain')
  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '' && !METHODS_WITH_BODY.has(request.method)) return done(null, undefined)
    return parseJson(request, body as string, done)
  })
})
