/**
 * Custom string formats used by the schemas. They are registered in the validators of the HTTP layer
 * (src/plugins/validation.ts); `format` names them in the OpenAPI document too.
 */
import { Type } from '@sinclair/typebox'
import { COUNTRY_CODES } from './country-codes.js'

export const MAX_URL_LENGTH = 4096

/** Characters as people count them, and as AJV's maxLength does: code points, not UTF-16 units ("😀" is one). */
export function codePointLength(text: string): number {
  let length = 0
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index)
    // A high surrogate followed by a low one is one character.
    if (unit >= 0xd800 && unit <= 0xdbff && index + 1 < text.length) {
      const next = text.charCodeAt(index + 1)
      if (next >= 0xdc00 && next <= 0xdfff) index++
    }
    length++
  }
  return length
}

/** Why a value is not an acceptable http(s) URL, said to the client; undefined when it is one. */
export function httpUrlProblem(value: string): string | undefined {
  // The WHATWG parser forgives "https:///path" or "http:example.com"; a destination must spell its host out.
  if ((value.length > MAX_URL_LENGTH && codePointLength(value) > MAX_URL_LENGTH) || /\s/.test(value) || !/^https?:\/\/[^/?#\\]/i.test(value)) return formatMessages['http-url']
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return formatMessages['http-url']
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') return formatMessages['http-url']
  // Browsers strip or warn about user:password@ and it would put a secret in every log; "https://@host/" parses
  // to no credentials at all, but says it means some: any "@" before the host is refused.
  const authority = value.slice(value.indexOf('//') + 2).split(/[/?#\\]/, 1)[0]
  if (authority.includes('@')) return 'must not contain a user name or password (user:password@)'
  return undefined
}

/** An absolute http or https URL with a host, no white space and no credentials. */
export function isHttpUrl(value: string): boolean {
  return httpUrlProblem(value) === undefined
}

/** An officially assigned ISO 3166-1 alpha-2 code, in either case. */
export function isCountryCode(value: string): boolean {
  // ASCII letters only: "ıt" (dotless i) and "ſe" (long s) are upper-cased to IT and SE.
  return /^[A-Za-z]{2}$/.test(value) && COUNTRY_CODES.has(value.toUpperCase())
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

/**
 * The instant an RFC 3339 date-time names (the schemas' `date-time` format, checked before). A leap second
 * (23:59:60), which the format allows and a JavaScript Date cannot read, is the instant it ends on: the next
 * minute's first, as POSIX time counts it.
 */
export function instantOf(dateTime: string): Date {
  const leap = /^(\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:)60(?=[.,Zz+-])/.exec(dateTime)
  if (!leap) return new Date(dateTime)
  const { length } = leap[0]
  const fraction = /^[.,]\d+/.exec(dateTime.slice(length))?.[0].length ?? 0
  // The fraction of the leap second is dropped with it: the instant is the end of the second, whatever part of it.
  return new Date(new Date(`${leap[1]}59${dateTime.slice(length + fraction)}`).getTime() + 1000)
}

/** The largest id of a row (an `integer` column of PostgreSQL: links' uniq, folders, scripts). */
export const MAX_ROW_ID = 2_147_483_647

/** Whether `value` can be a row's id: beyond the column's range asking the database is an error, not a miss. */
export const isRowId = (value: number) => Number.isSafeInteger(value) && value >= 1 && value <= MAX_ROW_ID

/** Why an integer parameter written otherwise than in plain decimal is refused (src/plugins/validation.ts). */
export const NOT_DECIMAL_MESSAGE =
  'must be a whole number in plain decimal digits (no sign +, exponent, hexadecimal, spaces or leading zeros)'

/**
 * The id of a row in a path: an integer, as the record that carries it says (`uniq`, a folder's or a
 * script's `id`), so a generated client passes `link.uniq` as it is. A path is text: the parameter
 * validator takes only plain decimal ("012", "+5", "1e1" are 400, not coerced) before checking the range.
 */
export const PathId = (description: string, example: number) =>
  Type.Integer({ minimum: 1, maximum: MAX_ROW_ID, description, examples: [example] })

/** A colour as `rrggbb` or `rrggbbaa`, with or without `#` (sent as `%23` in a query: a bare `#` starts the fragment). */
export const HEX_COLOR_PATTERN = '^#?([0-9A-Fa-f]{6}|[0-9A-Fa-f]{8})$'

/** Some character other than white space: a pixel id or a script that is only spaces would load nothing. */
export const NOT_BLANK_PATTERN = '\\S'

/** What a failed pattern means, for the patterns the schemas use. */
export const patternMessages: Record<string, string> = {
  [NOT_BLANK_PATTERN]: 'must not be blank',
  '^[0-9]+$': 'must be a string of digits',
  '^[A-Za-z0-9_-]+$': 'may contain only letters A-Z and a-z, digits, - and _',
  [HEX_COLOR_PATTERN]: 'must be a hex colour: rrggbb or rrggbbaa, with or without # (%23)',
}
