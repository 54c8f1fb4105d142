/**
 * A bounded number of places for work that costs much at once (memory, a thread of libuv's pool): at most
 * `maxRunning` holders, at most `maxWaiting` in line behind them, first come first served. A caller beyond the
 * line is told at once (`take` answers false) rather than queued without bound, so that it can answer 503 with
 * Retry-After instead of after a wait of seconds. A waiter leaves the line when its `signal` aborts (its client
 * went away) or after `maxWaitMs`. Once the line is closed (`closeLine`) nobody waits: a place is given only when
 * one is free.
 */
export class Slots {
  private running = 0
  private readonly waiting: ((admitted: boolean) => void)[] = []
  private lineClosed = false

  constructor(
    readonly maxRunning: number,
    readonly maxWaiting: number,
  ) {}

  /** Holders now, and callers in line. */
  get counts(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length }
  }

  /** True once a place is the caller's (it must `giveBack` it once), false if none was given. */
  take(options: { signal?: AbortSignal; maxWaitMs?: number } = {}): Promise<boolean> {
    const { signal, maxWaitMs } = options
    if (signal?.aborted) return Promise.resolve(false)
    if (this.running < this.maxRunning) {
      this.running++
      return Promise.resolve(true)
    }
    if (this.lineClosed || this.waiting.length >= this.maxWaiting) return Promise.resolve(false)
    return new Promise<boolean>((resolve) => {
      let timer: NodeJS.Timeout | undefined
      const leave = () => {
        const at = this.waiting.indexOf(admit)
        if (at !== -1) this.waiting.splice(at, 1)
        admit(false)
      }
      // Called with true by giveBack (the place passes on), or false when the caller leaves the line.
      const admit = (admitted: boolean) => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', leave)
        resolve(admitted)
      }
      this.waiting.push(admit)
      signal?.addEventListener('abort', leave, { once: true })
      if (maxWaitMs !== undefined) timer = setTimeout(leave, maxWaitMs)
    })
  }

  /** Sends everyone in line away without a place (their `take` answers false), and lets nobody wait from now on. */
  closeLine(): void {
    this.lineClosed = true
    for (const admit of this.waiting.splice(0)) admit(false)
  }

  /** Gives a place back: to the first caller in line, or free. */
  giveBack(): void {
    const next = this.waiting.shift()
    if (next) next(true)
    else this.running--
  }

  /** `work`'s answer, run in a place; `busy` when none was given. */
  async run<T>(work: () => Promise<T>): Promise<T | 'busy'> {
    if (!(await this.take())) return 'busy'
    try {
      return await work()
    } finally {
      this.giveBack()
    }
  }
}
