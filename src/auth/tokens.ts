import { createHash, randomBytes } from 'node:crypto'

const TOKEN_PREFIX = 'sl_'
/** Characters of a token kept in clear for display and revocation: "sl_" and 8 more. */
export const DISPLAY_PREFIX_LENGTH = 11

/** A new API token: 192 random bits, URL-safe, recognisable by its "sl_" start. */
export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(24).toString('base64url')
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

export function displayPrefix(token: string): string {
  return token.slice(0, DISPLAY_PREFIX_LENGTH)
}
