/**
 * The seam for counting visits: app.visits.record is called once per visit that reached its destination (302,
 * masking page, interstitial page) and per crawler preview, after the answer, with what a visit counter needs;
 * never for HEAD, 404s, expired links or password forms; and a recorder that fails does not fail the visit.
 */
import t from 'tap'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Visit, VisitRecorder } from '../../src/redirects/visits.js'
import { buildTestApp } from '../support/test-app.js'
import { acmeWorkspace, DESKTOP, FACEBOOK_CRAWLER, visit } from './visit-support.js'

const T = Date.UTC(2031, 2, 1)
const recorded: Visit[] = []
let failing = false
const recorder: VisitRecorder = {
  record(visit) {
    if (failing) throw new Error('the visit store is down')
    recorded.push(visit)
  },
}
const errors: string[] = []
const first = await buildTestApp(t, {
  redirects: { visits: recorder, now: () => T },
  logger: { level: 'error', stream: { write: (line: string) => void errors.push(JSON.parse(line).msg) } },
})
const { app } = first
const { link } = await acmeWorkspace(first)
const plain = await link({ id: 'plain', url: 'https://example.com/plain' })
await link({ id: 'masked', url: 'https://example.com/masked', masking: true })
await link({ id: 'pixel', url: 'https://example.com/pixel', pixels: [{ platform: 'facebook', value: '1' }] })
await link({ id: 'expired', linkExpiration: { enable: true, end: new Date(T).toISOString(), url: 'https://example.com/old', timezone: 0 } })
await link({ id: 'secret', passwordProtect: { enable: true, password: 'pw' } })

t.beforeEach(() => {
  recorded.length = 0
  failing = false
})

t.test('a redirect is recorded once, after the answer, with what a counter needs', async (t) => {
  const response = await visit(app, '/plain?utm=1', {
    headers: { 'cf-ipcountry': 'NL', referer: 'https://news.example/', 'user-agent': DESKTOP },
    remoteAddress: '198.51.100.7',
  })
  t.equal(response.statusCode, 302)
  await nextTurn()
  t.same(recorded, [
    {
      link: plain.uniq,
      workspaceId: plain.workspaceId,
      domain: 'go.acme.test',
      answer: 'redirect',
      destination: 'https://example.com/plain', // as chosen: the visit's own query would split the counts
      reason: 'default',
      at: T,
      country: 'NL',
      userAgent: DESKTOP,
      referrer: 'https://news.example/',
      address: '198.51.100.7',
    },
  ])
})

t.test('the masking and interstitial pages are visits too, and a crawler preview; nothing else is', async (t) => {
  await visit(app, '/masked')
  await visit(app, '/pixel')
  for (const path of ['/plain', '/masked']) await visit(app, path, { method: 'HEAD' })
  await visit(app, '/plain', { headers: { 'user-agent': FACEBOOK_CRAWLER } })
  for (const path of ['/missing', '/expired', '/secret', '/robots.txt']) await visit(app, path)
  await nextTurn()
  t.same(recorded.map((visit) => visit.answer), ['masking', 'interstitial', 'crawler'])
  t.match(recorded[2], { link: plain.uniq, destination: 'https://example.com/plain', reason: 'default', userAgent: FACEBOOK_CRAWLER })
})

t.test('a recorder that fails does not fail the visit; the error is logged', async (t) => {
  failing = true
  const response = await visit(app, '/plain')
  t.equal(response.statusCode, 302)
  await nextTurn()
  t.ok(errors.includes('redirects: recording a visit failed'))
})
