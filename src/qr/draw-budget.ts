/**
 * A bound on the CPU that drawing QR codes may take: at most `msPerSecond` of drawing in each second, shared by
 * both QR routes of the process. A PNG of 2,048 pixels takes about 4 ms to draw, as much as a hundred redirects,
 * and the public route needs no token and can be asked for in ever new sizes and colours (so neither an ETag nor
 * a CDN answers it): without a bound, a flood of such requests would take the cores the redirects need. Past the
 * budget a draw is refused (503, Retry-After: 1) until the next second; answers from a client's own copy (304)
 * cost nothing and are never refused.
 */
import { AppError } from '../errors/app-error.js'

/** A quarter of a core: what QR codes may take from the redirects at most. */
export const QR_DRAW_MS_PER_SECOND = 250

export const qrBusy = () =>
  new AppError(503, 'unavailable', 'Too many QR codes are being drawn right now; try again in a second', undefined, {
    'retry-after': '1',
    'cache-control': 'no-store',
  })

export class DrawBudget {
  private secondStartedAt = -Infinity
  private spentMs = 0
  /** Draws refused: metrics and tests. */
  refused = 0

  constructor(
    private readonly msPerSecond = QR_DRAW_MS_PER_SECOND,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Runs `draw` and charges its time, or throws qrBusy() when this second's budget is spent. */
  run<T>(draw: () => T): T {
    const started = this.now()
    if (started - this.secondStartedAt >= 1000) {
      this.secondStartedAt = started
      this.spentMs = 0
    }
    if (this.spentMs >= this.msPerSecond) {
      this.refused++
      throw qrBusy()
    }
    try {
      return draw()
    } finally {
      this.spentMs += this.now() - started
    }
  }
}
