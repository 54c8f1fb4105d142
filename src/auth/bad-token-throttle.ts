/**
 * Makes guessing tokens not pay: after `limit` requests with a bad token from one client address within
 * a window, every request from that address is refused until the window has passed (so a lucky guess
 * cannot be told apart). Counts live in this process; entries expire with their window.
 */

/**
 * Most addresses followed at once: past it the oldest windows are forgotten, so memory stays bounded however many
 * addresses send bad tokens (an attacker with that many addresses gets their tries anyway).
 */
export const MAX_TRACKED_ADDRESSES = 100_000

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
    this.forgetEnded()
    return this.blockedFor(address)
  }

  /** Addresses followed now (tests). */
  get tracked(): number {
    return this.windows.size
  }

  private current(address: string) {
    const window = this.windows.get(address)
    if (window && this.now() - window.startedAt >= this.windowMs) {
      this.windows.delete(address)
      return undefined
    }
    return window
  }

  /**
   * Windows are kept in the order they began (an address whose window ended begins a new one at the end), so the
   * ended ones are at the front: the walk stops at the first still running, a step or two per failure. (A walk of
   * every window at each failure past 10,000 addresses made each bad token cost milliseconds.)
   */
  private forgetEnded(): void {
    const now = this.now()
    for (const [address, window] of this.windows) {
      if (now - window.startedAt < this.windowMs && this.windows.size <= MAX_TRACKED_ADDRESSES) return
      this.windows.delete(address)
    }
  }
}
