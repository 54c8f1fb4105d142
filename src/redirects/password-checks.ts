/**
 * Bounds the password checks under way. scrypt (src/links/password.ts) takes about 90 ms and 32 MiB on one of
 * libuv's four threads, which DNS lookups (autofill) and file reads share. The try limit counts per link and
 * address, so wrong passwords sent from many addresses at once would otherwise queue without bound, every visitor
 * with the right password behind them. At most `maxRunning` checks run and `maxWaiting` wait; a try beyond is
 * answered at once, 503 with Retry-After, rather than after a wait of seconds.
 */
export class PasswordChecks {
  private running = 0
  private readonly waiting: (() => void)[] = []

  constructor(
    private readonly maxRunning = 2,
    private readonly maxWaiting = 32,
  ) {}

  /** The check's answer, or `busy` when too many checks are under way. */
  async run<T>(check: () => Promise<T>): Promise<T | 'busy'> {
    if (this.running < this.maxRunning) this.running++
    else if (this.waiting.length < this.maxWaiting) await new Promise<void>((resolve) => this.waiting.push(resolve))
    else return 'busy'
    try {
      return await check()
    } finally {
      // The place passes to the next check waiting, or is given back.
      const next = this.waiting.shift()
      if (next) next()
      else this.running--
    }
  }
}
