/**
 * The interstitial page and the eleven pixel tags: which script each platform loads with the pixel's id,
 * the init its vendor prescribes, the hosts its CSP allows, the consent banner, the no-JavaScript fallback.
 */
import t from 'tap'
import { interstitialPage, type InterstitialOptions } from '../../../src/redirects/pages/index.js'
import { INTERSTITIAL_SCRIPT } from '../../../src/redirects/pages/interstitial-runtime.js'
import { PIXEL_TAGS } from '../../../src/redirects/pages/pixel-tags.js'
import { PLATFORMS } from '../../../schemas/link.js'
import { byTag, meta, parseCsp } from './parse.js'

const link = { title: 'Summer sale', description: null, image: null, favicon: null, shortUrl: 'https://go.acme.test/summer' }

function render(options: Partial<InterstitialOptions> = {}) {
  const page = interstitialPage({
    link,
    destination: 'https://example.com/landing?utm_source=x',
    pixels: [],
    scripts: [],
    showGDPR: false,
    appLink: null,
    ...options,
  })
  const scripts = byTag(page.html, 'script')
  const dataBlock = scripts.find((script) => script.attrs.type === 'application/json')
  return { page, csp: parseCsp(page.csp), scripts, data: JSON.parse(dataBlock?.text ?? 'null'), nonce: /'nonce-([^']+)'/.exec(page.csp)?.[1] }
}

/** Whether a URL matches one of a directive's https host sources (exact origin or https://*.domain). */
function allowedBy(url: string, sources: string[]): boolean {
  const { protocol, hostname, origin } = new URL(url)
  return sources.some((source) => {
    const wildcard = /^https:\/\/\*\.(.+)$/.exec(source)
    return wildcard ? protocol === 'https:' && hostname.endsWith(`.${wildcard[1]}`) : source === origin
  })
}

/** Per platform: the script the pixel id loads (or the fixed library), and one CSP host of each kind. */
const EXPECTED: Record<string, { script: string; init: RegExp; scriptHost: string; imgHost: string; connectHost: string }> = {
  facebook: { script: 'https://connect.facebook.net/en_US/fbevents.js', init: /fbq\('init', id\)/, scriptHost: 'https://connect.facebook.net', imgHost: 'https://www.facebook.com', connectHost: 'https://www.facebook.com' },
  ga: { script: 'https://www.googletagmanager.com/gtag/js?id=PIXEL-1', init: /gtag\('config', id\)/, scriptHost: 'https://*.googletagmanager.com', imgHost: 'https://*.google-analytics.com', connectHost: 'https://*.g.doubleclick.net' },
  gtm: { script: 'https://www.googletagmanager.com/gtm.js?id=PIXEL-1', init: /'gtm\.start'/, scriptHost: 'https://www.googletagmanager.com', imgHost: 'https://www.googletagmanager.com', connectHost: 'https://www.google.com' },
  adwords: { script: 'https://www.googletagmanager.com/gtag/js?id=PIXEL-1', init: /gtag\('config', id\)/, scriptHost: 'https://www.googleadservices.com', imgHost: 'https://googleads.g.doubleclick.net', connectHost: 'https://www.google.com' },
  linkedin: { script: 'https://snap.licdn.com/li.lms-analytics/insight.min.js', init: /_linkedin_data_partner_ids\.push\(id\)/, scriptHost: 'https://snap.licdn.com', imgHost: 'https://px.ads.linkedin.com', connectHost: 'https://px.ads.linkedin.com' },
  twitter: { script: 'https://static.ads-twitter.com/uwt.js', init: /twq\('config', id\)/, scriptHost: 'https://static.ads-twitter.com', imgHost: 'https://t.co', connectHost: 'https://analytics.twitter.com' },
  pinterest: { script: 'https://s.pinimg.com/ct/core.js', init: /pintrk\('load', id\)/, scriptHost: 'https://s.pinimg.com', imgHost: 'https://ct.pinterest.com', connectHost: 'https://ct.pinterest.com' },
  quora: { script: 'https://a.quora.com/qevents.js', init: /qp\('init', id\)/, scriptHost: 'https://a.quora.com', imgHost: 'https://q.quora.com', connectHost: 'https://q.quora.com' },
  bing: { script: 'https://bat.bing.com/bat.js', init: /new w\.UET\(o\)/, scriptHost: 'https://bat.bing.com', imgHost: 'https://bat.bing.com', connectHost: 'https://bat.bing.com' },
  adroll: { script: 'https://s.adroll.com/j/PIXEL-1/roundtrip.js', init: /adroll_adv_id = parts\[0\]/, scriptHost: 'https://s.adroll.com', imgHost: 'https://d.adroll.com', connectHost: 'https://d.adroll.com' },
  nexus: { script: 'https://acdn.adnxs.com/dmp/up/pixie.js', init: /pixie\('init', id\)/, scriptHost: 'https://acdn.adnxs.com', imgHost: 'https://ib.adnxs.com', connectHost: 'https://ib.adnxs.com' },
}

t.test('there is a tag for each of the eleven platforms of the specification', async (t) => {
  t.same(Object.keys(PIXEL_TAGS).sort(), [...PLATFORMS].sort())
  t.same(Object.keys(EXPECTED).sort(), [...PLATFORMS].sort())
})

for (const platform of PLATFORMS) {
  t.test(`${platform}: its vendor's script with the pixel's id, its init, and its hosts in the CSP`, async (t) => {
    const { data, csp, nonce } = render({ pixels: [{ platform, value: 'PIXEL-1' }] })
    const expected = EXPECTED[platform]
    t.same(data.pixels, [{ platform, ids: ['PIXEL-1'], scripts: [expected.script] }])
    t.match(INTERSTITIAL_SCRIPT, new RegExp(`"${platform}": \\{ init: function \\(ids, w\\)`))
    t.match(PIXEL_TAGS[platform].ready ?? PIXEL_TAGS[platform].init, expected.init)
    t.ok(csp['script-src'].includes(`'nonce-${nonce}'`))
    t.ok(csp['script-src'].includes(expected.scriptHost), expected.scriptHost)
    t.ok(csp['img-src'].includes(expected.imgHost), expected.imgHost)
    t.ok(csp['connect-src'].includes(expected.connectHost), expected.connectHost)
    for (const pixel of data.pixels) {
      for (const src of pixel.scripts) t.ok(allowedBy(src, csp['script-src']), `${src} is allowed by script-src`)
    }
    t.notOk(csp['script-src'].includes("'strict-dynamic'"), 'without workspace scripts the host list holds')
    t.notOk(csp['script-src'].includes("'unsafe-inline'") || csp['script-src'].includes("'unsafe-eval'"))
  })
}

t.test('the CSP of a page with pixels lists only those platforms’ hosts', async (t) => {
  const { csp } = render({ pixels: [{ platform: 'pinterest', value: '1' }] })
  t.same(csp['script-src'].slice(1), ['https://s.pinimg.com'])
  t.same(csp['img-src'], ['data:', 'https://ct.pinterest.com'])
  t.same(csp['connect-src'], ['https://ct.pinterest.com'])
  t.notOk(csp['frame-src'])
  const google = render({ pixels: [{ platform: 'adwords', value: 'AW-1' }] }).csp
  t.same(google['frame-src'], ['https://td.doubleclick.net', 'https://bid.g.doubleclick.net', 'https://www.googletagmanager.com'])
})

t.test('several pixels of a platform: one library, every id initialised; ids go into URLs encoded', async (t) => {
  const { data } = render({
    pixels: [
      { platform: 'facebook', value: '111' },
      { platform: 'facebook', value: ' 222 ' },
      { platform: 'facebook', value: '111' },
      { platform: 'gtm', value: 'GTM-A' },
      { platform: 'gtm', value: 'GTM-B&x=1' },
      { platform: 'adroll', value: 'ADV1/PIX1' },
      { platform: 'bing', value: '  ' },
      { platform: 'myspace', value: '1' },
    ],
  })
  t.same(data.pixels, [
    { platform: 'facebook', ids: ['111', '222'], scripts: ['https://connect.facebook.net/en_US/fbevents.js'] },
    { platform: 'gtm', ids: ['GTM-A', 'GTM-B&x=1'], scripts: ['https://www.googletagmanager.com/gtm.js?id=GTM-A', 'https://www.googletagmanager.com/gtm.js?id=GTM-B%26x%3D1'] },
    { platform: 'adroll', ids: ['ADV1/PIX1'], scripts: ['https://s.adroll.com/j/ADV1/roundtrip.js'] },
  ], 'blank values and unknown platforms are left out')
})

t.test('the page script is one constant, allowed by the nonce; the data travels in a JSON block', async (t) => {
  const one = render({ pixels: [{ platform: 'facebook', value: '1' }] })
  const two = render({ pixels: [{ platform: 'quora', value: '</script>' }], showGDPR: true })
  for (const { scripts, nonce } of [one, two]) {
    t.equal(scripts.length, 2)
    t.same(scripts[0].attrs, { type: 'application/json', id: 'page-data' })
    t.same(scripts[1].attrs, { nonce })
    t.equal(scripts[1].text, INTERSTITIAL_SCRIPT, 'the same text whatever the link')
  }
  t.not(one.nonce, two.nonce)
  t.same(one.data, {
    destination: 'https://example.com/landing?utm_source=x',
    consent: false,
    pixels: [{ platform: 'facebook', ids: ['1'], scripts: ['https://connect.facebook.net/en_US/fbevents.js'] }],
    scripts: [],
    appLink: null,
  })
})

t.test('without JavaScript: a refresh to the destination after a second, and the vendors’ noscript images', async (t) => {
  const { page } = render({ pixels: [{ platform: 'facebook', value: '42' }, { platform: 'ga', value: 'G-1' }] })
  const noJs = byTag(page.html, 'meta', { scripting: false }).find((m) => m.attrs['http-equiv'] === 'refresh')
  t.equal(noJs?.attrs.content, '1;url=https://example.com/landing?utm_source=x')
  t.notOk(byTag(page.html, 'meta').some((m) => m.attrs['http-equiv']), 'with JavaScript the refresh is not there (the script decides)')
  const images = byTag(page.html, 'img', { scripting: false }).map((img) => img.attrs.src)
  t.same(images, ['https://www.facebook.com/tr?id=42&ev=PageView&noscript=1'])
  t.equal(meta(page.html, 'robots'), 'noindex')
  const [link] = byTag(page.html, 'a')
  t.equal(link.attrs.href, 'https://example.com/landing?utm_source=x', 'a link to follow by hand')
})

t.test('with showGDPR: the banner first, Accept and Decline, no refresh and no noscript pixel', async (t) => {
  const { page, data } = render({ showGDPR: true, pixels: [{ platform: 'facebook', value: '42' }, { platform: 'bing', value: '7' }] })
  t.equal(data.consent, true)
  const [consent] = byTag(page.html, 'section').filter((s) => s.attrs.id === 'consent')
  t.match(consent.text, /Before you continue/)
  t.match(consent.text, /Meta Pixel, Microsoft Advertising \(UET\)/, 'names what would load')
  const decline = byTag(page.html, 'a').find((a) => a.attrs.id === 'decline')
  t.equal(decline?.text, 'Decline')
  t.equal(decline?.attrs.href, 'https://example.com/landing?utm_source=x', 'Decline works without JavaScript too')
  const accept = byTag(page.html, 'button').find((b) => b.attrs.id === 'accept')
  t.equal(accept?.text, 'Accept')
  t.ok('hidden' in accept!.attrs, 'Accept appears only when the script runs (it needs it)')
  t.ok('hidden' in byTag(page.html, 'section').find((s) => s.attrs.id === 'progress')!.attrs)
  const noJs = byTag(page.html, 'meta', { scripting: false })
  t.notOk(noJs.some((m) => m.attrs['http-equiv'] === 'refresh'))
  t.equal(byTag(page.html, 'img', { scripting: false }).length, 0)
})

t.test('with showGDPR but nothing to load (deep linking alone): no banner, the page moves on', async (t) => {
  const appLink = { app: 'YouTube', url: 'vnd.youtube://watch?v=abc', fallback: 'https://www.youtube.com/watch?v=abc' }
  const { page, data } = render({ showGDPR: true, appLink, destination: 'https://www.youtube.com/watch?v=abc' })
  t.equal(data.consent, false)
  t.notOk(byTag(page.html, 'section').some((s) => s.attrs.id === 'consent'), 'no banner')
  t.notOk('hidden' in byTag(page.html, 'section').find((s) => s.attrs.id === 'progress')!.attrs)
  t.ok(byTag(page.html, 'meta', { scripting: false }).some((m) => m.attrs['http-equiv'] === 'refresh'), 'and without JavaScript too')
  // Workspace scripts alone are asked about, as pixels are.
  t.equal(render({ showGDPR: true, scripts: [{ id: 1, content: "window.hello = 'world'" }] }).data.consent, true)
})

t.test('workspace scripts: passed as data, inserted by the page script with its nonce; the CSP opens for them', async (t) => {
  const { data, csp, nonce } = render({
    scripts: [
      { id: 1, content: '<script src="https://chat.example/w.js"></script>' },
      { id: 2, content: "window.hello = 'world'" },
      { id: 3, content: '   ' },
    ],
  })
  t.same(data.scripts, [
    { kind: 'html', content: '<script src="https://chat.example/w.js"></script>' },
    { kind: 'js', content: "window.hello = 'world'" },
  ])
  t.same(csp['script-src'], [`'nonce-${nonce}'`, "'strict-dynamic'", "'unsafe-eval'", 'https:'])
  t.same(csp['style-src'], ["'unsafe-inline'", 'https:'], "a snippet's inline styles apply; a nonce beside them would cancel them")
  t.same(csp['connect-src'], ['https:'])
  t.same(csp['img-src'], ['data:', 'https:'])
})

t.test('deep link: the app link travels as data; the page says which app; the fallback is the web address', async (t) => {
  const appLink = { app: 'YouTube', url: 'youtube://www.youtube.com/watch?v=x', fallback: 'https://www.youtube.com/watch?v=x' }
  const { page, data } = render({ destination: appLink.fallback, appLink })
  t.same(data.appLink, appLink)
  t.equal(byTag(page.html, 'h1')[0].text, 'Opening YouTube…')
  t.same(byTag(page.html, 'a').map((a) => [a.text, a.attrs.href]), [
    ['Open the app', appLink.url],
    ['Continue in the browser', appLink.fallback],
  ], 'buttons for a visitor whose browser wants a tap before it opens an app')
  t.equal(render({ appLink: { ...appLink, fallback: 'javascript:alert(1)' } }).data.appLink, null, 'a fallback that is not http(s) is dropped')
  for (const url of ['javascript:alert(1)', 'data:text/html,x', 'https://example.com/']) {
    t.equal(render({ appLink: { ...appLink, url } }).data.appLink, null, `${url}: not an app address`)
  }
})
