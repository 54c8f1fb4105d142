/**
 * The per-page cache of autofill (contract section 12): what a page gave, for an hour, so many links to
 * one page cost one fetch. A page that could not be fetched is remembered for a minute only, so a bulk
 * import against a dead site does not wait out the time budget for every link, while a page that is
 * fixed is tried again soon. In Redis when REDIS_URL is set (shared by every instance), else in process.
 */
import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import { withDeadline } from '../redis/redis-client.js'
import { LIMITS } from '../../schemas/link.js'
import { codePointLength, httpUrlProblem } from '../../schemas/formats.js'
import { METADATA_FIELDS, type PageMetadata } from './metadata.js'

export const METADATA_TTL_MS = 60 * 60 * 1000
export const FAILURE_TTL_MS = 60 * 1000

/** What is known of a page: its metadata, or why it could not be used. */
export type CachedPage = { metadata: PageMetadata } | { failure: string }

export interface MetadataCache {
  get(url: string): Promise<CachedPage | undefined>
  set(url: string, page: CachedPage): Promise<void>
}

/** What each field may hold: text within the field's limit, or an http(s) address the API would take. */
const FIELD_CHECKS: Record<(typeof METADATA_FIELDS)[number], (text: string) => boolean> = {
  title: (text) => codePointLength(text) <= LIMITS.title,
  description: (text) => codePointLength(text) <= LIMITS.description,
  image: (text) => httpUrlProblem(text) === undefined,
  favicon: (text) => httpUrlProblem(text) === undefined,
}

/**
 * Whether a value read back from Redis is a page as this service writes them. Anything else (another version's
 * format during a rolling upgrade, a value someone set by hand) is a miss: autofill fetches the page, rather than
 * failing the request on a shape it does not know.
 */
export function isCachedPage(value: unknown): value is CachedPage {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return false
  if ('failure' in value) return typeof value.failure === 'string'
  if (!('metadata' in value) || !value.metadata || typeof value.metadata !== 'object') return false
  const metadata = value.metadata as Record<string, unknown>
  return METADATA_FIELDS.every((field) => {
    const text = metadata[field]
    return text === undefined || (typeof text === 'string' && FIELD_CHECKS[field](text))
  })
}

export const ttlOf = (page: CachedPage) => ('failure' in page ? FAILURE_TTL_MS : METADATA_TTL_MS)

/** The bytes a page takes in the cache, roughly: its address and texts (two bytes a character at most). */
function sizeOf(url: string, page: CachedPage): number {
  const texts = 'failure' in page ? [page.failure] : Object.values(page.metadata)
  return 128 + 2 * (url.length + texts.reduce((sum, text) => sum + (text?.length ?? 0), 0))
}

/**
 * In process: the least recently used pages dropped past `maxEntries` or `maxBytes` (pages may hold a few KiB of
 * text each), an entry past its lifetime dropped when read or when room is needed.
 */
export class MemoryMetadataCache implements MetadataCache {
  private readonly entries: LRUCache<string, CachedPage>

  constructor(options: { maxEntries?: number; maxBytes?: number; now?: () => number } = {}) {
    this.entries = new LRUCache({
      max: options.maxEntries ?? 10_000,
      maxSize: options.maxBytes ?? 16 * 1024 * 1024,
      sizeCalculation: (page, url) => sizeOf(url, page),
      // An injected clock is read every time (lru-cache otherwise reuses a reading for 1 ms of real time).
      ...(options.now ? { perf: { now: options.now }, ttlResolution: 0 } : {}),
    })
  }

  async get(url: string): Promise<CachedPage | undefined> {
    return this.entries.get(url)
  }

  async set(url: string, page: CachedPage): Promise<void> {
    this.entries.set(url, page, { ttl: ttlOf(page) })
  }
}

/**
 * In Redis: one string per page, keyed by a hash of its address (addresses can be 4 KiB), expiring with
 * the entry. A Redis that does not answer within the deadline is a cache miss, not an error: autofill
 * then fetches the page itself.
 */
export class RedisMetadataCache implements MetadataCache {
  constructor(
    private readonly redis: Redis,
    private readonly options: { keyPrefix?: string; deadlineMs?: number } = {},
  ) {}

  key(url: string): string {
    return `${this.options.keyPrefix ?? ''}autofill:${createHash('sha256').update(url).digest('base64url')}`
  }

  async get(url: string): Promise<CachedPage | undefined> {
    const value = await withDeadline(this.redis.get(this.key(url)), this.options.deadlineMs)
    if (!value) return undefined
    const page: unknown = JSON.parse(value)
    return isCachedPage(page) ? page : undefined
  }

  async set(url: string, page: CachedPage): Promise<void> {
    await withDeadline(this.redis.set(this.key(url), JSON.stringify(page), 'PX', ttlOf(page)), this.options.deadlineMs)
  }
}
