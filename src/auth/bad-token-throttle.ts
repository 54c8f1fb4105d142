/**
 * Makes guessing tokens not pay: after `limit` requests with a bad token from one client address within
 * a window, every request from that address is refused until the window has passed (so a lucky guess
 * cannot be told apart). Counts live in this process; entries expire with their window.
 */
export class BadTokenThrottle {
  private readonly windows = new Map<string, { startedAt: number; failures: number }>()
  /** Requests refused (429) because their address was blocked: metrics. */
  refusals = 0

  constructor(
    private readonly limit = 30,
    private readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds until the address may try again, or 0 when it is not blocked. */
  blockedFor(address: string): number {
    const window = this.current(address)
    if (!window || window.failures <= this.limit) return 0
    return Math.max(1, Math.ceil((window.startedAt + this.windowMs - this.now()) / 1000))
  }

  /** Counts one more bad token from the address; returns blockedFor(address) after counting it. */
  recordFailure(address: string): number {
    const window = this.current(address)
    if (window) window.failures++
    else this.windows.set(address, { startedAt: this.now(), failures: 1 })
    if (this.windows.size > 10_000) this.prune()
    return this.blockedFor(address)
  }

  private current(address: string) {
    const window = this.windows.get(address)
    if (window && this.now() - window.startedAt >= this.windowMs) {
      this.windows.delete(address)
      return undefined
    }
    return window
  }

  private prune(): void {
    for (const address of this.windows.keys()) this.current(address)
  }
}
