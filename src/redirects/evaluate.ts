/**
 * The evaluation order of contract section 11 for one visit of a known link, as a value (`Answer`) that
 * respond.ts turns into HTTP. The password step's form handling (POST) is in redirect-routes.ts; here a
 * visit is either `unlocked` (the cookie, or the right password just given) or not.
 */
import { isCrawler } from './crawler.js'
import { appendVisitQuery, chooseDestination, destinationReason, type DestinationReason } from './destination.js'
import { appLinkFor, phoneOs, type AppLink } from './pages/index.js'
import type { RedirectView } from './redirect-view.js'

export type Answer =
  | { kind: 'not-found' }
  | { kind: 'expired'; location: string }
  | { kind: 'gone' }
  | { kind: 'password' }
  | { kind: 'crawler' }
  | ({ kind: 'masking' } & Reached)
  | ({ kind: 'interstitial'; appLink: AppLink | null } & Reached)
  | ({ kind: 'redirect' } & Reached)

/** Where a visit that reaches a destination goes. */
interface Reached {
  /** The address the visitor is sent to: the chosen url with the visit's query string. */
  destination: string
  /**
   * The url chosen, as the link stores it, without the visit's query: what analytics count (a click id in the
   * query would make every visit a destination of its own).
   */
  chosenUrl: string
  reason: DestinationReason
}

export const NOT_FOUND: Answer = { kind: 'not-found' }

export interface VisitFacts {
  userAgent: string | undefined
  country: string | null
  /** The raw query string of the visit (after `?`), or ''. */
  query: string
  /** The visitor may pass the password step. */
  unlocked: boolean
  /** The visit came over HTTPS (request.protocol: X-Forwarded-Proto from a trusted proxy). */
  secure: boolean
}

/** Expired: `now` at or past the end (contract: now ≥ end). */
export const isExpired = (view: RedirectView, now: number) => view.expiresAt !== null && now >= view.expiresAt

export function evaluate(view: RedirectView, facts: VisitFacts, now: number, random: () => number): Answer {
  if (isExpired(view, now)) return view.expirationUrl !== null ? { kind: 'expired', location: view.expirationUrl } : { kind: 'gone' }
  if (view.passwordHash !== null && !facts.unlocked) return { kind: 'password' }
  if (isCrawler(facts.userAgent)) return { kind: 'crawler' }
  const chosen = chooseDestination(view, facts.country, random)
  const reason = destinationReason(view, facts.country, chosen)
  const reached: Reached = { destination: appendVisitQuery(chosen.location, facts.query), chosenUrl: chosen.url, reason }
  // A browser will not show an http: page in a frame of an https: one (mixed content): a blank page. Such a visit
  // goes on as the link would without masking.
  if (view.masking && !(facts.secure && /^http:/i.test(reached.destination))) return { kind: 'masking', ...reached }
  const os = view.deepLinkingEnable ? phoneOs(facts.userAgent) : null
  const appLink = os ? appLinkFor(reached.destination, os) : null
  if (view.pixels.length > 0 || view.scripts.length > 0 || appLink) return { kind: 'interstitial', ...reached, appLink }
  return { kind: 'redirect', ...reached }
}
