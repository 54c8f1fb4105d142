/**
 * Autofill (contract section 12): fills a link's empty title, description, image and favicon from its
 * destination page. It never fails the request: whatever goes wrong, the link keeps what it was given
 * and the outcome says `failed` (with the reason for the log).
 *
 * One page, one fetch: results are cached per address (metadata-cache.ts), and concurrent links to a page
 * nobody has fetched yet wait for the same fetch (in this instance).
 */
import { fetchPage, STOPPED, type PageFetchOptions } from './page-fetch.js'
import { METADATA_FIELDS, extractMetadata, type MetadataField, type PageMetadata } from './metadata.js'
import type { CachedPage, MetadataCache } from './metadata-cache.js'

/** What X-Autofill says. */
export type AutofillStatus = 'filled' | 'partial' | 'failed' | 'skipped'

export type LinkMetadata = Record<MetadataField, string | null>

export interface AutofillResult {
  status: AutofillStatus
  /** The fields autofill set; only ones that were empty. */
  filled: Partial<Record<MetadataField, string>>
  /** Why the page could not be used (`failed` only). */
  reason?: string
}

export interface AutofillOptions extends PageFetchOptions {
  cache: MetadataCache
  /** Called when the cache cannot be read or written (Redis down): autofill goes on without it. */
  onCacheError?: (error: unknown) => void
}

export const SKIPPED: AutofillResult = { status: 'skipped', filled: {} }

export class Autofill {
  private readonly inFlight = new Map<string, Promise<CachedPage>>()
  /** What fill() answered, pages fetched (not from the cache, not joined) and cache calls that failed: metrics. */
  readonly counts: Record<AutofillStatus, number> & { fetches: number; cacheFailures: number } = {
    filled: 0, partial: 0, failed: 0, skipped: 0, fetches: 0, cacheFailures: 0,
  }

  constructor(private readonly options: AutofillOptions) {}

  /** Fills the empty fields of `link` from the page at `url`. */
  async fill(url: string, link: LinkMetadata): Promise<AutofillResult> {
    const result = await this.tryFill(url, link)
    this.counts[result.status]++
    return result
  }

  private async tryFill(url: string, link: LinkMetadata): Promise<AutofillResult> {
    const empty = METADATA_FIELDS.filter((field) => !link[field])
    if (empty.length === 0) return SKIPPED
    const page = await this.page(url)
    if ('failure' in page) return { status: 'failed', filled: {}, reason: page.failure }
    const filled: AutofillResult['filled'] = {}
    for (const field of empty) {
      const value = page.metadata[field]
      if (value) filled[field] = value
    }
    const status = Object.keys(filled).length === empty.length ? 'filled' : 'partial'
    return { status, filled }
  }

  /** What the page at `url` gives: from the cache, from a fetch already under way, or fetched now. */
  private async page(url: string): Promise<CachedPage> {
    const key = cacheKey(url)
    const cached = await this.options.cache.get(key).catch((error) => this.cacheFailed(error))
    if (cached) return cached
    let pending = this.inFlight.get(key)
    if (!pending) {
      pending = this.scrape(url).finally(() => this.inFlight.delete(key))
      this.inFlight.set(key, pending)
    }
    return pending
  }

  private cacheFailed(error: unknown): undefined {
    this.counts.cacheFailures++
    this.options.onCacheError?.(error)
    return undefined
  }

  private async scrape(url: string): Promise<CachedPage> {
    this.counts.fetches++
    let page: CachedPage
    try {
      const fetched = await fetchPage(url, this.options)
      const metadata: PageMetadata = await extractMetadata(fetched.html, fetched.url)
      page = { metadata }
    } catch (error) {
      page = { failure: error instanceof Error ? error.message : String(error) }
      // Ended because this instance is closing: the page itself may be fine, for the others.
      if ((error as Error | null)?.cause === STOPPED) return page
    }
    // Not awaited: the answer does not wait for the cache (a Redis that hangs would cost it the deadline).
    this.options.cache.set(cacheKey(url), page).catch((error) => this.cacheFailed(error))
    return page
  }
}

/** One entry per page: the address as the WHATWG parser writes it, without the fragment (never sent). */
function cacheKey(url: string): string {
  const parsed = new URL(url)
  parsed.hash = ''
  return parsed.href
}
