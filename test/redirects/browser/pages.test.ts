/**
 * The other pages in a real browser: the masked link shows its destination in a full-viewport frame; the
 * 404, 410 and crawler pages as visitors see them; and the injection attempts, through every page, which
 * must not run (no dialog, no page error, the hostile text shown as text).
 */
import t, { type Test } from 'tap'
import { DESKTOP, screenshot, startVisitorSide, type Visit } from './browser.js'

const side = await startVisitorSide(t)
const NAVIGATION = { timeout: 10_000 }
const FACEBOOK_CRAWLER = 'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)'

const TITLE = '</title><script>alert(1)</script>'
const DESCRIPTION = `"><script>alert(2)</script><p title='x' onmouseover='alert(3)'>`
const PIXEL_VALUES = ["'});alert(1)//", '</script><script>alert(1)</script>', '"><img src=x onerror=alert(1)>']

await side.link({
  id: 'masked',
  url: side.destination.url('/masked?utm_source=mask'),
  masking: true,
  title: 'Acme spring collection',
  description: 'New in: the spring collection.',
})
await side.link({
  id: 'sale',
  url: side.destination.url('/sale'),
  title: 'Summer sale: everything half price',
  description: 'Our biggest sale of the year, this week only.',
  image: 'https://cdn.example.com/summer.png',
})
// Expired without a url (the 410 page): the API wants both, so the database is told directly.
const expiring = await side.link({
  id: 'over',
  url: side.destination.url('/over'),
  linkExpiration: { enable: true, end: new Date(Date.now() + 86_400_000).toISOString(), url: side.destination.url('/later'), timezone: 0 },
})
await side.prisma.link.update({ where: { uniq: expiring.uniq }, data: { expiresAt: new Date('2020-01-01T00:00:00Z'), expirationUrl: null } })
side.app.redirects.linksChanged([{ domain: expiring.domain, slug: expiring.id }])

/** A link whose every field is hostile; image and favicon are written to the database directly (the API refuses them). */
async function hostileLink(id: string, fields: Record<string, unknown>) {
  const record = await side.link({ id, url: side.destination.url(`/${id}`), title: TITLE, description: DESCRIPTION, ...fields })
  await side.prisma.link.update({ where: { uniq: record.uniq }, data: { image: 'javascript:alert(4)', favicon: 'javascript:alert(5)' } })
  side.app.redirects.linksChanged([{ domain: record.domain, slug: record.id }])
}
const pixels = ['facebook', 'ga', 'gtm', 'twitter', 'bing', 'adroll'].flatMap((platform) => PIXEL_VALUES.map((value) => ({ platform, value })))
await hostileLink('evil-pixels', { pixels })
await hostileLink('evil-mask', { masking: true })
await hostileLink('evil-consent', { pixels, showGDPR: true })
await hostileLink('evil-page', {})

const quiet = (t: Test, visit: Visit) => {
  t.same(visit.dialogs, [], 'no dialog: nothing injected ran')
  t.same(visit.console.filter((line) => line.startsWith('pageerror')), [], 'no page error')
}

t.test('masking: the short address shows the destination in a frame over the whole viewport', async (t) => {
  for (const [name, viewport] of [['phone', undefined], ['desktop', DESKTOP]] as const) {
    const visit = await side.open({ viewport })
    const response = await visit.page.goto(side.short('masked'))
    t.equal(response?.status(), 200)
    t.equal(visit.page.url(), side.short('masked'), 'the address bar keeps the short address')
    t.equal(await visit.page.title(), 'Acme spring collection')
    t.match(response?.headers()['content-security-policy'], /frame-src http: https:;/)
    const frame = visit.page.frameLocator('iframe')
    t.equal(await frame.locator('#destination').textContent(NAVIGATION), 'Destination page')
    t.ok(side.destination.visits.includes('/masked?utm_source=mask'), 'the frame loaded the destination')
    const box = await visit.page.locator('iframe').boundingBox()
    const size = visit.page.viewportSize()!
    t.same(box, { x: 0, y: 0, width: size.width, height: size.height }, 'the frame covers the viewport')
    await screenshot(visit.page, `masking-${name}`)
    quiet(t, visit)
    await visit.context.close()
  }
})

t.test('masking: a destination that moves to another host of its site still shows in the frame', async (t) => {
  await side.link({ id: 'masked-moving', url: side.destination.url('/to-www/landing'), masking: true })
  const visit = await side.open()
  await visit.page.goto(side.short('masked-moving'))
  const frame = visit.page.frameLocator('iframe')
  t.equal(await frame.locator('#destination').textContent(NAVIGATION), 'Destination page', 'the moved page in the frame')
  t.ok(side.destination.visits.includes('/landing'), 'the frame followed the move')
  t.same(visit.console.filter((line) => /Content Security Policy|frame-src/.test(line)), [], 'no CSP violation')
  quiet(t, visit)
  await visit.context.close()
})

t.test('masking an http: destination on a page the visitor sees over https: goes to the destination instead', async (t) => {
  // TLS ended by a proxy that does not tell the service so: the page is served as over HTTP, and the browser, on
  // https:, would block the http: frame (a blank page). Served here by the browser's routing as an https: page.
  await side.link({ id: 'masked-insecure', url: side.destination.url('/insecure?from=mask'), masking: true })
  const visit = await side.open()
  const secureAddress = side.short('masked-insecure').replace(/^http:/, 'https:')
  await visit.page.route(secureAddress, async (route) => {
    const address = new URL(side.short('masked-insecure'))
    const response = await route.fetch({ url: address.href.replace(address.hostname, '127.0.0.1'), headers: { host: address.host } })
    await route.fulfill({ response })
  })
  await visit.page.goto(secureAddress)
  await visit.page.waitForURL(side.destination.url('/insecure?from=mask'), NAVIGATION)
  t.equal(await visit.page.textContent('#destination'), 'Destination page', 'the destination, at the top level')
  t.same(visit.console.filter((line) => /Content Security Policy/.test(line)), [], 'no CSP violation')
  quiet(t, visit)
  await visit.context.close()
})

t.test('404, 410 and the crawler preview, as people see them', async (t) => {
  for (const [name, viewport] of [['phone', undefined], ['desktop', DESKTOP]] as const) {
    const visit = await side.open({ viewport })
    t.equal((await visit.page.goto(side.short('no-such-link')))?.status(), 404)
    t.equal(await visit.page.textContent('h1'), 'Link not found')
    await screenshot(visit.page, `not-found-${name}`)
    t.equal((await visit.page.goto(side.short('over')))?.status(), 410)
    t.equal(await visit.page.textContent('h1'), 'This link has expired')
    await screenshot(visit.page, `expired-${name}`)
    await visit.context.close()

    const crawler = await side.open({ viewport, userAgent: FACEBOOK_CRAWLER })
    t.equal((await crawler.page.goto(side.short('sale')))?.status(), 200)
    t.equal(await crawler.page.getAttribute('meta[property="og:title"]', 'content'), 'Summer sale: everything half price')
    t.equal(await crawler.page.getAttribute('meta[property="og:image"]', 'content'), 'https://cdn.example.com/summer.png')
    await screenshot(crawler.page, `crawler-${name}`)
    t.same(crawler.thirdParty, [], 'the preview loads nothing')
    await crawler.page.waitForTimeout(1200)
    t.equal(crawler.page.url(), side.short('sale'), 'and does not move on')
    await crawler.context.close()
  }
})

t.test('injection through the interstitial: the pixels load with the hostile ids as data, nothing runs', async (t) => {
  const visit = await side.open()
  await visit.page.goto(side.short('evil-pixels'))
  await visit.page.waitForURL(side.destination.url('/evil-pixels'), NAVIGATION)
  quiet(t, visit)
  t.ok(visit.thirdParty.includes(`https://www.googletagmanager.com/gtm.js?id=${encodeURIComponent(PIXEL_VALUES[1])}`),
    'the id reached the vendor URL encoded')
  await visit.context.close()
})

t.test('injection through the consent banner and, after Accept, the tags', async (t) => {
  const visit = await side.open()
  await visit.page.goto(side.short('evil-consent'))
  t.equal(await visit.page.title(), TITLE, 'the title is text')
  await screenshot(visit.page, 'injection-consent-phone')
  await Promise.all([visit.page.waitForURL(side.destination.url('/evil-consent'), NAVIGATION), visit.page.click('#accept')])
  quiet(t, visit)
  await visit.context.close()
})

t.test('injection through the masking page, the crawler page and the password form', async (t) => {
  const masked = await side.open()
  await masked.page.goto(side.short('evil-mask'))
  t.equal(await masked.page.title(), TITLE)
  t.equal(await masked.page.locator('link[rel=icon]').getAttribute('href'), 'data:,', 'the javascript: favicon was dropped')
  await masked.page.frameLocator('iframe').locator('#destination').waitFor(NAVIGATION)
  quiet(t, masked)
  await masked.context.close()

  const crawler = await side.open({ userAgent: FACEBOOK_CRAWLER })
  await crawler.page.goto(side.short('evil-page'))
  t.equal(await crawler.page.title(), TITLE)
  t.equal(await crawler.page.textContent('h1'), TITLE)
  t.equal(await crawler.page.getAttribute('meta[property="og:description"]', 'content'), DESCRIPTION)
  t.equal(await crawler.page.locator('meta[property="og:image"]').count(), 0)
  await crawler.page.hover('h1')
  await screenshot(crawler.page, 'injection-crawler-phone')
  quiet(t, crawler)
  await crawler.context.close()
})
