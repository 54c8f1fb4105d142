import { STATUS_CODES } from 'node:http'
import type { ErrorCodeName, FieldErrorBody, ProblemBody } from '../../schemas/problem.js'

/**
 * The one error type of the service: each case has a named constructor below, carries its HTTP status
 * and renders as application/problem+json in src/plugins/errors.ts.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCodeName,
    readonly detail: string,
    readonly errors?: FieldErrorBody[],
    readonly headers: Record<string, string> = {},
  ) {
    super(detail)
    this.name = 'AppError'
  }

  toProblem(): ProblemBody {
    return {
      type: 'about:blank',
      title: STATUS_CODES[this.status] ?? 'Error',
      status: this.status,
      code: this.code,
      detail: this.detail,
      ...(this.errors ? { errors: this.errors } : {}),
    }
  }
}

/** `detail` reads like the contract's example: "link/url must be an absolute http(s) URL; …". */
function describe(errors: FieldErrorBody[]): string {
  return errors.map((error) => `${error.path.replace(/^\//, '') || 'body'} ${error.message}`).join('; ')
}

/**
 * V8's JSON.parse quotes the body around some errors (`Unexpected token 'h', "…":hunter2…" is not valid JSON`): a
 * password or a token could reach the answer and the log. Such a reason is said without the quote; the others name
 * only a position.
 */
const withoutQuotedBody = (reason: string) => (/^Unexpected token\b[\s\S]*is not valid JSON$/.test(reason) ? 'an unexpected character' : reason)

export const invalidJson = (reason: string) => new AppError(400, 'invalid_json', `The body is not valid JSON: ${withoutQuotedBody(reason)}`)

/**
 * The most field errors one 400 lists: a body can hold thousands of bad values, and an answer (and a log
 * line) as large as the request helps nobody. The detail says how many more there were.
 */
export const MAX_FIELD_ERRORS = 50

/** `total`: how many errors there are in all, when `errors` holds only the first ones. */
export const validationFailed = (errors: FieldErrorBody[], total = errors.length) => {
  const listed = errors.slice(0, MAX_FIELD_ERRORS)
  const more = total - listed.length
  const detail = describe(listed) + (more > 0 ? `; and ${more} more (a 400 lists at most ${MAX_FIELD_ERRORS})` : '')
  return new AppError(400, 'validation_failed', detail, listed)
}

export const fieldError = (path: string, message: string) => validationFailed([{ path, message }])

/** Each destination (its JSON pointer and host) that points to a short domain of this service. */
export const redirectLoop = (...loops: { path: string; host: string }[]) =>
  new AppError(
    400,
    'redirect_loop',
    loops.map(({ path, host }) => `${path.replace(/^\//, '')} points to ${host}, a short domain of this service`).join('; '),
    loops.map(({ path, host }) => ({ path, message: `must not point to a short domain of this service (${host})` })),
  )

export const slugReserved = (slug: string) =>
  new AppError(400, 'slug_reserved', `link/id "${slug}" is reserved for the service's own paths`, [
    { path: '/link/id', message: 'is reserved for the service' },
  ])

export const unauthorized = () =>
  new AppError(401, 'unauthorized', 'A valid API token is required in the Api-Authorization header')

/** GET /metrics without the METRICS_TOKEN it is configured with (src/metrics/metrics-routes.ts). */
export const metricsUnauthorized = () =>
  new AppError(401, 'unauthorized', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>', undefined, {
    'www-authenticate': 'Bearer realm="metrics"',
  })

export const domainReserved = (domain: string) =>
  new AppError(
    403,
    'domain_reserved',
    `The domain ${domain} is reserved for official integrations. Pass one of your workspace's domains in link.domain, ` +
      'or ask an operator to add one as its default (domain:add --default).',
  )

/** An update or delete of a link on a reserved domain by a token that is not official. */
export const reservedLinkUnchangeable = (domain: string) =>
  new AppError(
    403,
    'domain_reserved',
    `The link is on ${domain}, a domain reserved for official integrations: only an official token may change or delete it.`,
  )

export const domainNotAllowed = (domain: string) =>
  new AppError(403, 'domain_not_allowed', `The domain ${domain} is not one of your workspace's domains`)

export const notFound = (what = 'link') => new AppError(404, 'not_found', `No such ${what}`)

export const slugTaken = (domain: string, slug: string) =>
  new AppError(409, 'slug_taken', `${domain}/${slug} is already taken`)

export const payloadTooLarge = (limit: number) =>
  new AppError(413, 'payload_too_large', `The body is larger than ${limit} bytes`)

export const unsupportedMediaType = (detail = 'The body must be sent as Content-Type: application/json') =>
  new AppError(415, 'unsupported_media_type', detail)

export const tooManyRequests = (detail: string, retryAfterSeconds: number) =>
  new AppError(429, 'rate_limited', detail, undefined, { 'retry-after': String(retryAfterSeconds) })

/** A workspace's quota for an operation is used up (contract section 8); the quota headers go with it. */
export const quotaExceeded = (operation: string, window: { name: string; limit: number; seconds: number }, retryAfterSeconds: number) =>
  tooManyRequests(
    `The workspace's quota of ${window.limit} ${operation}s per ${window.name} (${window.seconds} s, sliding) is used up; ` +
      `try again in ${retryAfterSeconds} s`,
    retryAfterSeconds,
  )

/**
 * Retry-After of every 503. A database or Redis that does not answer has failed a 250 ms to 3 s deadline
 * already, and a pool that could not serve a request in 3 s is draining a burst that, on the smallest
 * machines measured, clears in a few seconds: 2 s lets a client come back soon without hammering a service
 * that is still catching up.
 */
export const RETRY_AFTER_UNAVAILABLE_SECONDS = 2
export const retryShortly = { 'retry-after': String(RETRY_AFTER_UNAVAILABLE_SECONDS) }

export const unavailable = (what = 'database') =>
  new AppError(503, 'unavailable', `The service cannot reach its ${what}; try again shortly`, undefined, retryShortly)

/** The database answers but cannot take this request in time (pool exhausted, lock conflicts retried in vain). */
export const databaseBusy = () =>
  new AppError(
    503,
    'unavailable',
    `The database is busy; try again in ${RETRY_AFTER_UNAVAILABLE_SECONDS} s`,
    undefined,
    retryShortly,
  )

/**
 * The instance is saturated (src/plugins/overload.ts): it refuses at once rather than queue a request until
 * its client gives up; the load balancer, told by /readyz, sends the next ones to another instance.
 */
export const overloaded = (what: 'event loop' | 'database pool') =>
  new AppError(
    503,
    'unavailable',
    `This instance is overloaded (its ${what} is saturated); try again in ${RETRY_AFTER_UNAVAILABLE_SECONDS} s`,
    undefined,
    retryShortly,
  )

/**
 * The connection to the database broke while a link was being stored and the service could not learn within a
 * few seconds whether it was (src/links/link-repository.ts): the one 503 after which the link may exist.
 */
export const writeOutcomeUnknown = () =>
  new AppError(
    503,
    'unavailable',
    'The connection to the database broke while the link was being stored, and the service could not learn whether ' +
      'it was: look it up before creating it again (a create retried with the same id answers 409 slug_taken if it was stored)',
    undefined,
    retryShortly,
  )

export const internal = () => new AppError(500, 'internal', 'Something went wrong on our side')
