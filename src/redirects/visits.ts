/**
 * The one place that knows a visit reached a destination (a 302 onwards, the masking page or the interstitial
 * page; not HEAD, crawlers, expired links or password forms). It is called after the answer is sent, so
 * whatever a recorder does never delays a visitor; counting visits is a later issue, so the default counts only.
 */
export interface Visit {
  /** The link's uniq and workspace. */
  link: number
  workspaceId: number
  answer: 'redirect' | 'masking' | 'interstitial'
  destination: string
  /** Milliseconds since the epoch. */
  at: number
  country: string | null
  userAgent: string | undefined
  referrer: string | undefined
  /** The client address (TRUST_PROXY applies). */
  address: string
}

export interface VisitRecorder {
  record(visit: Visit): void
}

export class CountingVisitRecorder implements VisitRecorder {
  recorded = 0

  record(): void {
    this.recorded++
  }
}
