import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import {
  AppError,
  databaseBusy,
  internal,
  invalidJson,
  notFound,
  payloadTooLarge,
  unavailable,
  unsupportedMediaType,
  validationFailed,
} from '../errors/app-error.js'
import { isDatabaseBusy, isDatabaseUnavailable, isTransactionConflict } from '../db/errors.js'
import { fieldErrors } from './validation.js'

export const BODY_LIMIT = 64 * 1024

/** Maps whatever was thrown to the AppError the client sees; `bodyLimit` is the route's (some routes allow more). */
export function toAppError(error: FastifyError | Error, bodyLimit = BODY_LIMIT): AppError {
  if (error instanceof AppError) return error
  const fastifyError = error as FastifyError
  if (fastifyError.validation) {
    return validationFailed(fieldErrors(fastifyError.validation as never))
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalidJson(fastifyError.message)
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return payloadTooLarge(bodyLimit)
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return unsupportedMediaType()
  }
  // Fastify's JSON parser reports malformed input as a SyntaxError carrying status 400.
  if (error instanceof SyntaxError && fastifyError.statusCode === 400) return invalidJson(error.message)
  if (isDatabaseUnavailable(error)) return unavailable()
  // Contention that outlasted the retries of src/db/transaction.ts, or a pool that could not serve in time.
  if (isDatabaseBusy(error) || isTransactionConflict(error)) return databaseBusy()
  return internal()
}

export function sendProblem(reply: FastifyReply, error: AppError): FastifyReply {
  return reply.code(error.status).headers(error.headers).type('application/problem+json').send(error.toProblem())
}

export default fp(async function errors(app: FastifyInstance) {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const appError = toAppError(error, request.routeOptions.bodyLimit)
    // A 503 is a dependency that is down or busy, not a fault of the service: logged, but not as an error.
    if (appError.status === 503) request.log.warn({ err: error }, 'request failed: service unavailable')
    else if (appError.status >= 500) request.log.error({ err: error }, 'request failed')
    else request.log.info({ code: appError.code, status: appError.status }, appError.detail)
    return sendProblem(reply, appError)
  })
  app.setNotFoundHandler((request, reply) => sendProblem(reply, notFound('route')))
})
