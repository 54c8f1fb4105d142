/**
 * The cookie that spares a visitor the password form of a link for 24 hours after the right password.
 *
 * Its value is `<uniq>.<expiry>.<signature>`: an HMAC-SHA256 with the service's key over the link's uniq, the
 * expiry (seconds since the epoch) and the link's password hash. A new password has a new salt and so a new
 * hash, which voids every cookie given before; the uniq ties it to one link; the expiry is checked here, not
 * only by the browser. It is HttpOnly, SameSite=Lax and host-only.
 *
 * Its name is the link's own, `sl_access_<uniq>`, with Path=/. A path of the slug would scope it to the spelling
 * the visitor typed: browsers compare cookie paths case by case and undecoded, while slugs match in any case,
 * so the same link opened as /Secret, or /%53ecret, would ask for the password again.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

/** The cookies' names start with this; the link's uniq follows. */
export const ACCESS_COOKIE = 'sl_access'
const cookieName = (link: ProtectedLink) => `${ACCESS_COOKIE}_${link.uniq}`
export const ACCESS_SECONDS = 24 * 60 * 60

export interface ProtectedLink {
  uniq: number
  passwordHash: string
}

export class PasswordCookies {
  private readonly key: Buffer | string

  /** `secret`: COOKIE_SECRET; without it a random key of this process (cookies end with it). */
  constructor(
    secret: string | undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.key = secret ?? randomBytes(32)
  }

  private sign(link: ProtectedLink, expiry: number): Buffer {
    return createHmac('sha256', this.key).update(`${link.uniq}.${expiry}.${link.passwordHash}`).digest()
  }

  /** The Set-Cookie value for a visitor who gave the right password. */
  issue(link: ProtectedLink, secure: boolean): string {
    const expiry = Math.floor(this.now() / 1000) + ACCESS_SECONDS
    const value = `${link.uniq}.${expiry}.${this.sign(link, expiry).toString('base64url')}`
    return `${cookieName(link)}=${value}; Max-Age=${ACCESS_SECONDS}; Path=/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`
  }

  /** True when the Cookie header holds an unexpired access cookie of this link and its current password. */
  allows(link: ProtectedLink, cookieHeader: string | undefined): boolean {
    if (!cookieHeader) return false
    const prefix = `${cookieName(link)}=`
    for (const part of cookieHeader.split(';')) {
      const text = part.trim()
      if (text.startsWith(prefix) && this.valid(link, text.slice(prefix.length))) return true
    }
    return false
  }

  private valid(link: ProtectedLink, value: string): boolean {
    const [uniq, expiryText, signature, extra] = value.split('.')
    if (extra !== undefined || uniq !== String(link.uniq) || !/^\d{1,12}$/.test(expiryText ?? '')) return false
    const expiry = Number(expiryText)
    if (this.now() >= expiry * 1000) return false
    const given = Buffer.from(signature ?? '', 'base64url')
    const expected = this.sign(link, expiry)
    return given.length === expected.length && timingSafeEqual(given, expected)
  }
}
