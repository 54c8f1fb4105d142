/** Content-Security-Policy strings for the visitor pages: `default-src 'none'` and only what a page adds. */
import { randomBytes } from 'node:crypto'

/** A fresh nonce per rendered page (128 random bits), so a nonce seen once is worth nothing later. */
export function newNonce(): string {
  return randomBytes(16).toString('base64')
}

export type Directives = Record<string, Iterable<string>>

/** The base every page starts from: nothing loads, no <base>, no forms, never framed (clickjacking). */
export function baseDirectives(nonce: string): Record<string, Set<string>> {
  return {
    'default-src': new Set(["'none'"]),
    'style-src': new Set([`'nonce-${nonce}'`]),
    'img-src': new Set(['data:']),
    'base-uri': new Set(["'none'"]),
    'form-action': new Set(["'none'"]),
    'frame-ancestors': new Set(["'none'"]),
  }
}

/** Adds sources to directives (creating them), skipping duplicates. */
export function allow(directives: Record<string, Set<string>>, extra: Directives): void {
  for (const [name, sources] of Object.entries(extra)) {
    const set = (directives[name] ??= new Set())
    for (const source of sources) set.add(source)
  }
}

const ORDER = ['default-src', 'script-src', 'style-src', 'img-src', 'font-src', 'connect-src', 'frame-src', 'form-action', 'base-uri', 'frame-ancestors']
const rank = (name: string) => (ORDER.includes(name) ? ORDER.indexOf(name) : ORDER.length)

/** "default-src 'none'; script-src …; …" in a fixed order, so a policy reads the same way on every page. */
export function cspString(directives: Record<string, Set<string>>): string {
  return Object.entries(directives)
    .sort(([a], [b]) => rank(a) - rank(b))
    .filter(([, sources]) => sources.size > 0)
    .map(([name, sources]) => `${name} ${[...sources].join(' ')}`)
    .join('; ')
}
