/**
 * A warning that may recur on every request (a dependency down meets them all): written at most once per
 * interval, the occurrences in between counted, so an outage costs a line a minute and still says how much it hit.
 */
export class OccasionalWarning {
  private lastWritten = -Infinity
  private occurrences = 0

  constructor(
    private readonly intervalMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Counts one occurrence. When a line is due, returns how many occurred since the previous line (this one
   * included) and starts the count again; otherwise null.
   */
  occurred(): number | null {
    this.occurrences++
    const now = this.now()
    if (now - this.lastWritten < this.intervalMs) return null
    this.lastWritten = now
    const occurrences = this.occurrences
    this.occurrences = 0
    return occurrences
  }

  /** The cause went away: its next occurrence is written at once, as news. */
  reset(): void {
    this.lastWritten = -Infinity
    this.occurrences = 0
  }
}
