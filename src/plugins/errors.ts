import { STATUS_CODES } from 'node:http'
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
  writeOutcomeUnknown,
} from '../errors/app-error.js'
import { isDatabaseBusy, isDatabaseUnavailable, isTransactionConflict, OutcomeUnknownError } from '../db/errors.js'
import { badRequest } from '../errors/http-errors.js'
import { fieldErrors } from './validation.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

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
  // Any other refusal of Fastify's own of a request it cannot handle (a QUERY without Content-Type): the client's.
  if (fastifyError.code?.startsWith('FST_ERR_') && fastifyError.statusCode === 400) return badRequest(fastifyError.message)
  // A library's refusal with a client status (the docs' static files: a path outside them, a range past the end):
  // the client's, never a 500 and an error in the log. Where the path led is not said.
  const status = fastifyError.statusCode ?? (error as { status?: unknown }).status
  if (!fastifyError.code?.startsWith('FST_ERR_') && typeof status === 'number' && status >= 400 && status < 500) {
    return status === 403 || status === 404 ? notFound('route') : badRequest(`The request cannot be served: ${STATUS_CODES[status] ?? status}`)
  }
  if (error instanceof OutcomeUnknownError) return writeOutcomeUnknown()
  if (isDatabaseUnavailable(error)) return unavailable()
  // Contention that outlasted the retries of src/db/transaction.ts, or a pool that could not serve in time.
  if (isDatabaseBusy(error) || isTransactionConflict(error)) return databaseBusy()
  return internal()
}

export function sendProblem(reply: FastifyReply, error: AppError): FastifyReply {
  return reply.code(error.status).headers(error.headers).type('application/problem+json').send(error.toProblem())
}

/**
 * A dependency down answers every request 503: each cause (the answer's detail: the database, the rate-limit
 * store...) logged once a minute at most per app, with how many of it went unlogged since its previous line.
 */
class UnavailableLog {
  private readonly causes = new Map<string, OccasionalWarning>()

  log(error: unknown, problem: AppError, request: FastifyRequest): void {
    let cause = this.causes.get(problem.detail)
    if (!cause) this.causes.set(problem.detail, (cause = new OccasionalWarning()))
    const occurrences = cause.occurred()
    if (occurrences === null) return
    request.log.warn({ err: error, unloggedSincePrevious: occurrences - 1 }, 'request failed: service unavailable (more of this cause within a minute are counted, not logged)')
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    unavailableLog: UnavailableLog
  }
}

/**
 * Answers whatever a request ended in as problem+json. An error of ours (500) is logged as an error; a 503 is a
 * dependency that is down or busy, not a fault of the service, so a warning, once a minute at most (an outage
 * would otherwise write one, with its stack, per request); the rest is information.
 */
export function replyWithError(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // A client that went away before its request had fully arrived makes its body stream fail ("aborted"):
  // nothing of ours failed, and the answer goes nowhere.
  const clientLeft = request.raw.destroyed && !request.raw.complete
  const appError = clientLeft
    ? badRequest('The connection closed before the request was complete')
    : toAppError(error, request.routeOptions?.bodyLimit)
  if (appError.status === 503) request.server.unavailableLog.log(error, appError, request)
  else if (appError.status >= 500) request.log.error({ err: error }, 'request failed')
  else request.log.info({ code: appError.code, status: appError.status }, appError.detail)
  return sendProblem(reply, appError)
}

export default fp(async function errors(app: FastifyInstance) {
  app.decorate('unavailableLog', new UnavailableLog())
  app.setErrorHandler(replyWithError)
  app.setNotFoundHandler((request, reply) => sendProblem(reply, notFound('route')))
})
