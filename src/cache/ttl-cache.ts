/**
 * A small in-process cache of database answers that change rarely (a token's record, a workspace's domains):
 * each entry is used for at most `ttlMs` after it was read, so a change made anywhere (another instance, the
 * command line, plain SQL) is seen by every instance within that time without any message; concurrent misses
 * of one key share one read, if it began less than `ttlMs` ago (a read held up by a slow database may have
 * read the row before a change: a request that comes later does not take its answer); at most `maxEntries`
 * entries (the oldest read goes first).
 *
 * `generation` is how a change made in this process is seen at once: the code that makes the change bumps it
 * (src/cache/change-notices.ts), and a cache whose entries were read under an older generation drops them all.
 */
export interface TtlCacheOptions {
  ttlMs: number
  maxEntries: number
  now?: () => number
  /** The current generation of what the cache holds; a change empties the cache. */
  generation?: () => number
}

export class TtlCache<K, V> {
  private readonly entries = new Map<K, { value: V; readAt: number }>()
  private readonly pending = new Map<K, { promise: Promise<V>; startedAt: number }>()
  private readonly now: () => number
  private seenGeneration: number

  constructor(private readonly options: TtlCacheOptions) {
    this.now = options.now ?? Date.now
    this.seenGeneration = options.generation?.() ?? 0
  }

  /** The cached value, or the loader's (stored unless `keep` says otherwise). */
  async get(key: K, load: () => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    this.checkGeneration()
    const entry = this.entries.get(key)
    const time = this.now()
    // (A clock that went back, in tests, reads again too.)
    if (entry && time >= entry.readAt && time - entry.readAt < this.options.ttlMs) return entry.value
    const inFlight = this.joinable(key, time)
    if (inFlight) return inFlight
    const generation = this.seenGeneration
    const loading: Promise<V> = load().then(
      (value) => {
        if (this.pending.get(key)?.promise === loading) this.pending.delete(key)
        this.entries.delete(key)
        // Read before a change this process made meanwhile: not kept.
        if (keep(value) && generation === (this.options.generation?.() ?? 0)) {
          if (this.entries.size >= this.options.maxEntries) this.entries.delete(this.entries.keys().next().value!)
          this.entries.set(key, { value, readAt: time })
        }
        return value
      },
      (error) => {
        if (this.pending.get(key)?.promise === loading) this.pending.delete(key)
        throw error
      },
    )
    this.pending.set(key, { promise: loading, startedAt: time })
    return loading
  }

  /** The read of `key` under way, if it began less than ttlMs ago. */
  private joinable(key: K, time: number): Promise<V> | undefined {
    const inFlight = this.pending.get(key)
    return inFlight && time >= inFlight.startedAt && time - inFlight.startedAt < this.options.ttlMs ? inFlight.promise : undefined
  }

  /** The cached value, or undefined when the key is not cached (or has expired). */
  peek(key: K): V | undefined {
    this.checkGeneration()
    const entry = this.entries.get(key)
    const time = this.now()
    return entry && time >= entry.readAt && time - entry.readAt < this.options.ttlMs ? entry.value : undefined
  }

  /**
   * Loads the keys that are not cached with one call (`load` answers a value for each key it is given), and
   * answers every key's value.
   */
  async getMany(keys: K[], load: (missing: K[]) => Promise<Map<K, V>>): Promise<Map<K, V>> {
    const values = new Map<K, V>()
    const waiting: [K, Promise<V>][] = []
    const missing: K[] = []
    const time = this.now()
    for (const key of keys) {
      const value = this.peek(key)
      const inFlight = value === undefined ? this.joinable(key, time) : undefined
      if (value !== undefined) values.set(key, value)
      else if (inFlight) waiting.push([key, inFlight])
      else missing.push(key)
    }
    const ours = new Map<K, Promise<V>>()
    if (missing.length > 0) {
      // One read for the keys nobody is reading yet; concurrent callers wait for it (no stampede at expiry).
      const generation = this.seenGeneration
      const loading = load(missing)
      for (const key of missing) {
        const one = loading.then((loaded) => loaded.get(key) as V)
        one.catch(() => {})
        this.pending.set(key, { promise: one, startedAt: time })
        ours.set(key, one)
        waiting.push([key, one])
      }
      try {
        const loaded = await loading
        const current = generation === (this.options.generation?.() ?? 0)
        for (const key of missing) {
          this.entries.delete(key)
          if (!current) continue
          if (this.entries.size >= this.options.maxEntries) this.entries.delete(this.entries.keys().next().value!)
          this.entries.set(key, { value: loaded.get(key) as V, readAt: time })
        }
      } finally {
        for (const key of missing) if (this.pending.get(key)?.promise === ours.get(key)) this.pending.delete(key)
      }
    }
    for (const [key, promise] of waiting) values.set(key, await promise)
    return values
  }

  get size(): number {
    return this.entries.size
  }

  clear(): void {
    this.entries.clear()
    this.pending.clear()
  }

  private checkGeneration(): void {
    const generation = this.options.generation?.() ?? 0
    if (generation !== this.seenGeneration) {
      this.seenGeneration = generation
      this.clear()
    }
  }
}
