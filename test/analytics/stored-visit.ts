/** A visit as storeVisits takes it, for the analytics tests: an unremarkable desktop visit unless `extra` says otherwise. */
import type { StoredVisit } from '../../src/analytics/visit-store.js'

export type VisitedLink = { uniq: number; domain: string; workspaceId: number }

/** A visit of `link` at `at` (ISO 8601) by person `visitor`. */
export const storedVisit = (link: VisitedLink, at: string, visitor: number, extra: Partial<StoredVisit> = {}): StoredVisit => ({
  at: new Date(at),
  linkUniq: link.uniq,
  workspaceId: link.workspaceId,
  domain: link.domain,
  country: 'US',
  referrerHost: null,
  device: 'desktop',
  os: 'Windows',
  browser: 'Chrome',
  destination: 'https://example.com/a',
  reason: 'default',
  answer: 'redirect',
  bot: false,
  visitor: String(visitor),
  ...extra,
})

/** What a crawler's preview is recorded as. */
export const BOT = { bot: true, device: 'bot', os: null, browser: null, referrerHost: null, answer: 'crawler' } as const
