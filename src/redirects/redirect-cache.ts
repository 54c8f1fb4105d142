/**
 * The in-process cache of redirect views, keyed by `<domain>/<slugKey>`:
 *
 * - a warm visit is one synchronous lookup (`peek`); a cold one is one database read, shared by the visits that
 *   ask for the same link meanwhile (single flight);
 * - bounded twice: by entries and by an estimate of their bytes (scripts make some views large); unknown slugs
 *   are kept apart, briefly, so a flood of made-up addresses cannot push the real links out;
 * - invalidation (invalidation.ts) drops entries; a read that was under way when something was invalidated
 *   answers its own visit but is not kept, since it may have read the row before the change was committed;
 * - a link past its lifetime is read again, but its view stays until it is evicted or invalidated: the last
 *   known view, which a visit gets while the database cannot be read (lastKnown).
 */
import { LRUCache } from 'lru-cache'
import { cacheKey, type RedirectView } from './redirect-view.js'

export { cacheKey }

export interface RedirectCacheOptions {
  /** Most links kept (default 100,000). */
  maxEntries?: number
  /** Most bytes of links kept, by the views' size estimate (default 64 MiB). */
  maxBytes?: number
  /** How long a link is kept without news of a change (default 60 s): bounds what invalidation misses. */
  ttlMs?: number
  /** Most unknown slugs kept (default 20,000) and for how long (default 10 s). */
  maxMissing?: number
  missingTtlMs?: number
  /** The clock of the lifetimes (tests). */
  now?: () => number
}

export const LINK_TTL_MS = 60_000
export const MISSING_TTL_MS = 10_000
/** A lookup of a link within its lifetime: one past it is kept (lastKnown) but not answered from. */
const WITHIN_LIFETIME = { allowStale: false } as const


export class RedirectCache {
  private readonly links: LRUCache<string, RedirectView>
  private readonly missing: LRUCache<string, true>
  private readonly loading = new Map<string, Promise<RedirectView | null>>()
  /** The key each cached link is kept under, by uniq (invalidateLinks): kept in step by `dispose`. */
  private readonly keyOfLink = new Map<number, string>()
  /** Counts invalidations: a read started under another generation is not kept. */
  private generation = 0
  /** Database reads made (the benchmark and tests look at it). */
  reads = 0
  /** Lookups (peek) the cache answered, and ones it could not (a read follows, or joins one under way): metrics. */
  hits = 0
  misses = 0

  constructor(
    private readonly read: (domain: string, slugKey: string) => Promise<RedirectView | null>,
    options: RedirectCacheOptions = {},
  ) {
    // An injected clock is read every time (lru-cache otherwise reuses a reading for 1 ms of real time).
    const clock = options.now ? { perf: { now: options.now }, ttlResolution: 0 } : {}
    this.links = new LRUCache({
      max: options.maxEntries ?? 100_000,
      maxSize: options.maxBytes ?? 64 * 1024 * 1024,
      sizeCalculation: (view) => view.size,
      ttl: options.ttlMs ?? LINK_TTL_MS,
      // Kept past their lifetime (lastKnown), and seen by entries() so that invalidateWorkspace drops them too;
      // find() asks for the ones within it.
      allowStale: true,
      noDeleteOnStaleGet: true,
      dispose: (view, key) => {
        if (this.keyOfLink.get(view.uniq) === key) this.keyOfLink.delete(view.uniq)
      },
      ...clock,
    })
    this.missing = new LRUCache({ max: options.maxMissing ?? 20_000, ttl: options.missingTtlMs ?? MISSING_TTL_MS, ...clock })
  }

  /**
   * The cached view, null for a slug known not to exist, undefined when the cache does not know. With
   * `maxAgeMs`, what was read longer ago than that counts as unknown (used while invalidations may be missed).
   */
  peek(key: string, maxAgeMs?: number): RedirectView | null | undefined {
    const found = this.find(key, maxAgeMs)
    if (found === undefined) this.misses++
    else this.hits++
    return found
  }

  private find(key: string, maxAgeMs: number | undefined): RedirectView | null | undefined {
    const view = this.links.get(key, WITHIN_LIFETIME)
    if (view !== undefined) return maxAgeMs === undefined || this.ageOf(this.links, key) <= maxAgeMs ? view : undefined
    if (!this.missing.get(key)) return undefined
    return maxAgeMs === undefined || this.ageOf(this.missing, key) <= maxAgeMs ? null : undefined
  }

  private ageOf<V extends object | boolean>(cache: LRUCache<string, V>, key: string): number {
    return (cache.ttl ?? 0) - cache.getRemainingTTL(key)
  }

  /**
   * The view of a link read at most `maxAgeMs` ago, even past its lifetime: what a visit gets when the database
   * cannot be read. Every invalidation heard since it was read has removed it if it changed.
   */
  lastKnown(key: string, maxAgeMs: number): RedirectView | undefined {
    const view = this.links.get(key)
    return view !== undefined && this.ageOf(this.links, key) <= maxAgeMs ? view : undefined
  }

  /** Reads the link from the database (joining a read of the same key under way) and keeps the answer. */
  load(domain: string, slugKey: string): Promise<RedirectView | null> {
    const key = cacheKey(domain, slugKey)
    const pending = this.loading.get(key)
    if (pending) return pending
    const generation = this.generation
    this.reads++
    const read = this.read(domain, slugKey).then(
      (view) => {
        if (this.loading.get(key) === read) this.loading.delete(key)
        if (generation === this.generation) {
          if (view) {
            this.links.set(key, view)
            this.keyOfLink.set(view.uniq, key)
          } else {
            // Gone: its old view, kept past its lifetime, must not be served as last known.
            this.links.delete(key)
            this.missing.set(key, true)
          }
        }
        return view
      },
      (error: unknown) => {
        if (this.loading.get(key) === read) this.loading.delete(key)
        throw error
      },
    )
    this.loading.set(key, read)
    return read
  }

  /** Forgets these links (or unknown slugs): a create, an update or a delete. */
  invalidate(keys: string[]): void {
    this.generation++
    // Visits arriving from now on must not join a read that may predate the change.
    this.loading.clear()
    for (const key of keys) {
      this.links.delete(key)
      this.missing.delete(key)
    }
  }

  /** Forgets these links, known by uniq: a write that failed may have changed them all the same. */
  invalidateLinks(uniqs: number[]): void {
    this.generation++
    this.loading.clear()
    for (const uniq of uniqs) {
      const key = this.keyOfLink.get(uniq)
      if (key !== undefined) this.links.delete(key)
    }
  }

  /** Forgets every link of a workspace: its pixels or scripts changed, which any of its links may show. */
  invalidateWorkspace(workspaceId: number): void {
    this.generation++
    this.loading.clear()
    const keys = [...this.links.entries()].filter(([, view]) => view.workspaceId === workspaceId).map(([key]) => key)
    for (const key of keys) this.links.delete(key)
  }

  /** Forgets everything: changes may have been missed (the invalidation channel was down). */
  clear(): void {
    this.generation++
    this.loading.clear()
    this.links.clear()
    this.missing.clear()
  }

  get size(): number {
    return this.links.size
  }
}
