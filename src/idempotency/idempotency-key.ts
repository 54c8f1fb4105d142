/**
 * Reading the Idempotency-Key header and fingerprinting the request it comes with.
 *
 * The draft defines the header as an RFC 8941 sf-string: `Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`.
 * Most clients in the wild (Stripe's, PayPal's and their imitators) send the bare value instead; both forms are
 * accepted and name the same key (`"abc"` and `abc` are one key). The key is 1 to MAX_KEY_LENGTH printable ASCII
 * characters; in the quoted form `\"` and `\\` stand for `"` and `\`, and nothing may follow the closing quote
 * (no sf-item parameters). The draft forbids sending the header twice; that is refused too.
 */
import { createHash } from 'node:crypto'
import { invalidIdempotencyKey } from '../errors/idempotency-errors.js'
import { timesSent } from '../plugins/raw-headers.js'

export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key'
export const MAX_KEY_LENGTH = 255

const PRINTABLE_ASCII = /^[\x20-\x7e]+$/
const KEY_RULE = `must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters, bare or as a quoted string ("…")`

/** The sf-string's content, or undefined when `value` is not exactly one well-formed sf-string. */
function unquote(value: string): string | undefined {
  let key = ''
  for (let i = 1; i < value.length; i++) {
    const char = value[i]
    if (char === '"') return i === value.length - 1 ? key : undefined
    if (char === '\\') {
      const escaped = value[++i]
      if (escaped !== '"' && escaped !== '\\') return undefined
      key += escaped
    } else {
      key += char
    }
  }
  return undefined
}

/** The key the header names; a 400 naming the header when it is not a valid key. */
export function parseIdempotencyKey(value: string | string[], rawHeaders: string[]): string {
  // Node joins repeated unknown headers into one value: counted as sent.
  if (Array.isArray(value) || timesSent(rawHeaders, IDEMPOTENCY_KEY_HEADER) > 1) throw invalidIdempotencyKey('must be sent once')
  // Node has trimmed the surrounding whitespace; what is left must be printable ASCII either way.
  if (!PRINTABLE_ASCII.test(value)) throw invalidIdempotencyKey(KEY_RULE)
  const key = value.startsWith('"') ? unquote(value) : value
  if (key === undefined) throw invalidIdempotencyKey(`${KEY_RULE}; the quoted form is one string with \\" and \\\\ as its only escapes`)
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) throw invalidIdempotencyKey(KEY_RULE)
  return key
}

/**
 * What tells one request from another under one key: SHA-256 of the operation and the body's bytes as they
 * arrived. Not canonicalised JSON: a retry is the same request sent again, byte for byte, by the same client;
 * canonicalising would cost a parse and a serialisation per request and would have to decide what is "the
 * same" (member order, duplicate members, `1.0` against `1`, escapes) with no way to be right for every
 * client. A client that re-serialises differently gets 422, which is safe: it never gets another request's
 * answer. The operation is part of it so that one key sent to create and then to bulk create is a mismatch.
 */
export function requestFingerprint(operation: string, body: Buffer | null): string {
  const hash = createHash('sha256').update(operation).update('\n')
  if (body) hash.update(body)
  return hash.digest('hex')
}
