/**
 * The one place that knows a visit reached a destination (a 302 onwards, the masking page or the interstitial
 * page) or a crawler previewed a link; not HEAD, expired links or password forms. It is called after the answer
 * is sent, so whatever a recorder does never delays a visitor. The service's recorder is
 * src/analytics/visit-recorder.ts; tests may count only.
 */
import type { DestinationReason } from './destination.js'

export interface Visit {
  /** The link's uniq and workspace. */
  link: number
  workspaceId: number
  /** The short domain the link is on. */
  domain: string
  answer: 'redirect' | 'masking' | 'interstitial' | 'crawler'
  /** The url chosen for the visitor, without the visit's query string (a crawler: the link's url). */
  destination: string
  /** How the destination was chosen (a crawler: default). */
  reason: DestinationReason
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
