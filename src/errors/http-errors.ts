/**
 * Errors of the HTTP exchange itself rather than of a route's input: a request the router or Node's HTTP
 * parser cannot read, one that arrives too slowly, and requests that arrive while the service shuts down.
 * Rendered as application/problem+json like every other AppError (src/plugins/http-server.ts).
 */
import { maxHeaderSize } from 'node:http'
import { AppError } from './app-error.js'

export const badRequest = (detail: string) => new AppError(400, 'bad_request', detail)

export const badPercentEncoding = () =>
  badRequest('The request path is not valid percent-encoded UTF-8')

export const missingHost = () => badRequest('An HTTP/1.1 request must carry a Host header')
export const invalidHost = () => badRequest('The request must carry one Host header, a host name or address with an optional port')
export const userinfoInTarget = () => badRequest('The request target must not hold user information (user@host)')

export const requestTimeout = () =>
  new AppError(408, 'request_timeout', 'The request did not arrive in time; send it again, without pauses')

export const uriTooLong = (maxParamLength: number) =>
  new AppError(414, 'uri_too_long', `A path segment is longer than ${maxParamLength} characters`)

export const expectationFailed = () =>
  new AppError(417, 'expectation_failed', 'The only Expect the service meets is 100-continue')

export const headersTooLarge = () =>
  new AppError(431, 'headers_too_large', `The request line and headers are larger than ${maxHeaderSize / 1024} KiB`)

/** Seconds a client waits before retrying a request refused during shutdown: another instance takes it. */
export const SHUTDOWN_RETRY_AFTER_SECONDS = 1

export const shuttingDown = () =>
  new AppError(503, 'unavailable', 'The service is shutting down; send the request again', undefined, {
    'retry-after': String(SHUTDOWN_RETRY_AFTER_SECONDS),
  })
