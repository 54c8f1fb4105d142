import { randomInt } from 'node:crypto'

/** Paths of the service itself: a slug equal to one of them (in any case) would hide it. */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set([
  'v1',
  'docs',
  'openapi.json',
  'healthz',
  'readyz',
  'metrics',
  'favicon.ico',
  'robots.txt',
])

const GENERATED_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789'
export const GENERATED_SLUG_LENGTH = 7

export function isReservedSlug(slug: string): boolean {
  return RESERVED_SLUGS.has(slug.toLowerCase())
}

/** Slugs are unique per domain regardless of case: this is the form the unique index holds. */
export function slugKey(slug: string): string {
  return slug.toLowerCase()
}

/** 7 characters of a-z0-9 from a cryptographic source (36^7, about 7.8e10 values); never a reserved word. */
export function generateSlug(): string {
  for (;;) {
    let slug = ''
    for (let i = 0; i < GENERATED_SLUG_LENGTH; i++) slug += GENERATED_ALPHABET[randomInt(GENERATED_ALPHABET.length)]
    if (!isReservedSlug(slug)) return slug
  }
}
