/** Visits as storeVisits takes them, and the app they go into, for the analytics tests. */
import type { StoredVisit } from '../../src/analytics/visit-store.js'
import { apiClient } from '../support/api-client.js'
import { buildTestApp, createWorkspaceToken, type Teardown } from '../support/test-app.js'

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

/**
 * The app of an analytics test, with workspace `acme` (domain go.acme.test) and its API client; `visit` makes a
 * visit of one of its links (a referrer by default), `setRolledUpTo` moves the rollup's mark by hand.
 */
export async function acmeAnalytics(t: Teardown) {
  const { app, prisma, database } = await buildTestApp(t)
  const token = await createWorkspaceToken(prisma, { workspace: 'acme', defaultDomain: 'go.acme.test' })
  const api = apiClient(app, token)
  const workspaceId = (await prisma.workspace.findUniqueOrThrow({ where: { name: 'acme' } })).id
  const visit = (link: { uniq: number; domain: string }, at: string, visitor: number, extra: Partial<StoredVisit> = {}) =>
    storedVisit({ ...link, workspaceId }, at, visitor, { referrerHost: 'news.example', ...extra })
  const setRolledUpTo = (at: string) => prisma.$executeRawUnsafe(`UPDATE "analytics"."Rollup" SET "rolledUpTo" = $1::timestamptz`, at)
  return { app, prisma, database, api, workspaceId, visit, setRolledUpTo }
}
