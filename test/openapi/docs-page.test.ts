/**
 * The interactive documentation (/docs) in a real browser: it shows the API's operations under its own
 * Content-Security-Policy (no violation), and no other site may frame it (people paste their token there).
 * (The plugin's own full policy, staticCSP, blocked the inline styles Swagger UI sets.)
 */
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { DESKTOP, launchBrowser, openPage, screenshot } from '../redirects/browser/browser.js'
import { buildTestApp } from '../support/test-app.js'

const { app } = await buildTestApp(t)
await app.listen({ port: 0, host: '127.0.0.1' })
const { port } = app.server.address() as AddressInfo
const browser = await launchBrowser(t, ['docs.test'])

t.test('the page lists the operations under its own policy, and may not be framed', async (t) => {
  const visit = await openPage(browser, ['docs.test'], { viewport: DESKTOP })
  const response = await visit.page.goto(`http://docs.test:${port}/docs`)
  t.equal(response?.status(), 200)
  t.equal(response?.headers()['content-security-policy'], "frame-ancestors 'none'")
  t.equal(response?.headers()['x-frame-options'], 'DENY')
  await visit.page.locator('.opblock-summary-operation-id, .opblock-summary-path').first().waitFor({ timeout: 15_000 })
  t.ok((await visit.page.locator('.opblock').count()) > 10, 'the operations are shown')
  t.ok(await visit.page.getByText('/v1/links/create').first().isVisible(), 'the create operation among them')
  t.same(visit.console.filter((line) => /Content Security Policy|Refused to/.test(line)), [], 'no CSP violation')
  t.same(visit.thirdParty, [], 'nothing fetched from elsewhere')
  await screenshot(visit.page, 'docs-desktop')
  await visit.context.close()
})
