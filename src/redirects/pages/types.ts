/** The shapes the redirect core and the pages share (see src/redirects/pages/index.ts). */

/** What a page may show of a link; every string is untrusted and escaped by the page for its context. */
export interface PageLink {
  title: string | null
  description: string | null
  image: string | null // http(s) URL or null
  favicon: string | null // http(s) URL or null
  shortUrl: string // https://<domain>/<slug>
}

/** A rendered page: the core sends `html` with this status, Content-Type text/html; charset=utf-8 and `csp`. */
export interface Page {
  status: number
  html: string
  csp: string
}

export interface AppLink {
  app: string
  url: string // custom scheme or intent:// URL
  fallback: string
}

export type PhoneOs = 'ios' | 'android'

export interface InterstitialOptions {
  link: PageLink
  destination: string
  pixels: { platform: string; value: string }[] // the 11 platforms of the spec
  scripts: { id: number; content: string }[] // workspace HTML/JS snippets (trusted by design)
  showGDPR: boolean // consent banner first; nothing loads before Accept
  appLink: AppLink | null // deep link to try first, from appLinkFor()
}
