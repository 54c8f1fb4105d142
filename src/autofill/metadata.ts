/**
 * The metadata autofill takes from a page (contract section 12), read by open-graph-scraper from HTML we
 * fetched ourselves (its `html` option: it never fetches here). Precedence: og:title, twitter:title,
 * <title>; og:description, twitter:description, meta description; og:image, twitter:image; the page's
 * icon link, else the site's /favicon.ico. Texts are decoded (the parser resolves entities), stripped of
 * control characters, white space collapsed, trimmed and cut to the field limits; addresses are resolved
 * against the page's final address and kept only when they are http(s) URLs the API would accept.
 */
import type ogsFunction from 'open-graph-scraper'
import type { OnlyGetOpenGraphInfoItem } from 'open-graph-scraper/types'
import { MAX_URL_LENGTH, isHttpUrl } from '../../schemas/formats.js'
import { LIMITS } from '../../schemas/link.js'
import { headTags } from './head-scan.js'

export const METADATA_FIELDS = ['title', 'description', 'image', 'favicon'] as const
export type MetadataField = (typeof METADATA_FIELDS)[number]
export type PageMetadata = Partial<Record<MetadataField, string>>

type OgsResult = Awaited<ReturnType<typeof ogsFunction>>['result']

/**
 * open-graph-scraper and its HTML parser are loaded on the first page read, not at start: an instance that only
 * redirects visitors (or whose clients send their metadata) never holds them in memory.
 */
let scraper: Promise<typeof ogsFunction> | undefined
const loadScraper = () => (scraper ??= import('open-graph-scraper').then((module) => module.default))

/** Fallbacks open-graph-scraper would otherwise also try, which the contract does not use. */
const UNUSED_FALLBACKS: OnlyGetOpenGraphInfoItem[] = ['image', 'audioUrl', 'locale', 'logo', 'url', 'date']

/** Reads the page's metadata; an empty page is an error (there is nothing to read, not merely no tags). */
export async function extractMetadata(source: string, pageUrl: URL): Promise<PageMetadata> {
  if (!source.trim()) throw new Error('the page is empty')
  // The HTML parser would turn NUL into U+FFFD, which cleanText could no longer tell from text. Only the tags
  // read below are parsed by the scraper: a head may hold thousands of others.
  const { html, icons } = await headTags(source.replaceAll('\0', ' '))
  // First the open-graph and twitter tags alone, then the plain HTML fallbacks (<title>, meta description,
  // icon links): the twitter tags come before the fallbacks, which one run cannot tell apart.
  const ogs = await loadScraper()
  const tags = (await ogs({ html, onlyGetOpenGraphInfo: true })).result
  const fallbacks = (await ogs({ html, onlyGetOpenGraphInfo: UNUSED_FALLBACKS })).result

  const metadata: PageMetadata = {}
  const title = firstText([tags.ogTitle, tags.twitterTitle, fallbacks.ogTitle], LIMITS.title)
  if (title) metadata.title = title
  const description = firstText([tags.ogDescription, tags.twitterDescription, fallbacks.ogDescription], LIMITS.description)
  if (description) metadata.description = description
  const image = firstAddress([...imageUrls(tags.ogImage), ...imageUrls(tags.twitterImage)], pageUrl)
  if (image) metadata.image = image
  // The scraper's pick first, then every icon link the page names; the site's /favicon.ico when none is usable.
  const favicon = firstAddress([fallbacks.favicon, ...icons], pageUrl) ?? firstAddress(['/favicon.ico'], pageUrl)
  if (favicon) metadata.favicon = favicon
  return metadata
}

function imageUrls(images: OgsResult['ogImage']): (string | undefined)[] {
  return (images ?? []).map((image) => image.url)
}

/** The first value that is still text once cleaned, cut to `limit` characters (code points, as the schema counts). */
function firstText(values: (string | undefined)[], limit: number): string | undefined {
  for (const value of values) {
    const text = cleanText(value ?? '')
    if (text) {
      const codePoints = Array.from(text)
      return codePoints.length > limit ? codePoints.slice(0, limit).join('').trimEnd() : text
    }
  }
  return undefined
}

export function cleanText(value: string): string {
  return value
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
}

/**
 * The first value that resolves against the page to an http(s) URL the link fields accept. Read as a browser reads
 * it: the URL parser drops the tabs and newlines inside and the controls and spaces around (an address broken over
 * two lines in the page's source is one address); cleaned as text, they became spaces, written %20.
 */
function firstAddress(values: (string | undefined)[], pageUrl: URL): string | undefined {
  for (const value of values) {
    const raw = (value ?? '').trim()
    if (!raw) continue
    let resolved: string
    try {
      resolved = new URL(raw, pageUrl).href
    } catch {
      continue
    }
    if (resolved.length <= MAX_URL_LENGTH && isHttpUrl(resolved)) return resolved
  }
  return undefined
}
