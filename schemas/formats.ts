/**
 * Custom string formats used by the schemas. They are registered in the validators of the HTTP layer
 * (src/http/validation.ts); `format` names them in the OpenAPI document too.
 */
import { COUNTRY_CODES } from './country-codes.js'

export const MAX_URL_LENGTH = 4096

/** An absolute http or https URL with a host and no white space. */
export function isHttpUrl(value: string): boolean {
  // The WHATWG parser forgives "https:///path" or "http:example.com"; a destination must spell its host out.
  if (value.length > MAX_URL_LENGTH || /\s/.test(value) || !/^https?:\/\/[^/?#\\]/i.test(value)) return false
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return false
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== ''
}

/** An officially assigned ISO 3166-1 alpha-2 code, in either case. */
export function isCountryCode(value: string): boolean {
  return value.length === 2 && COUNTRY_CODES.has(value.toUpperCase())
}

export const customFormats = {
  'http-url': isHttpUrl,
  'country-code': isCountryCode,
} as const

/** What a failed custom format means, said to the client in the error body. */
export const formatMessages: Record<string, string> = {
  'http-url': 'must be an absolute http(s) URL',
  'country-code': 'must be an ISO 3166-1 alpha-2 country code',
  uuid: 'must be a UUID',
  'date-time': 'must be an ISO 8601 date-time',
}

/** What a failed pattern means, for the patterns the schemas use. */
export const patternMessages: Record<string, string> = {
  '^[0-9]+$': 'must be a string of digits',
  '^[0-9]{1,3}$': 'must be a string of digits',
  '^[A-Za-z0-9_-]+$': 'may contain only letters A-Z and a-z, digits, - and _',
}
