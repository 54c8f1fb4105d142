/**
 * Injection attempts through every value a link holds: no page gains a script, an event handler or a
 * script URL, and each value is read back by the parser exactly as it was given (escaped, not mangled).
 */
import t from 'tap'
import {
  crawlerPage,
  interstitialPage,
  maskingPage,
  passwordPage,
  type Page,
  type PageLink,
} from '../../../src/redirects/pages/index.js'
import { PLATFORMS } from '../../../schemas/link.js'
import { activeContent, byTag, meta } from './parse.js'

const TITLE = '</title><script>alert(1)</script>'
const DESCRIPTION = `He said "hi" & left' onload='alert(1)`
const PIXEL_VALUES = ["'});alert(1)//", '</script><script>alert(1)</script>', '"><img src=x onerror=alert(1)>', '\u2028alert(1)\u2029']

const hostile: PageLink = {
  title: TITLE,
  description: DESCRIPTION,
  image: 'javascript:alert(1)',
  favicon: 'javascript:alert(1)',
  shortUrl: 'https://go.acme.test/x',
}

function interstitial(showGDPR: boolean) {
  return interstitialPage({
    link: hostile,
    destination: 'https://example.com/?q="><script>alert(1)</script>',
    pixels: PLATFORMS.flatMap((platform) => PIXEL_VALUES.map((value) => ({ platform, value }))),
    scripts: [],
    showGDPR,
    appLink: null,
  })
}

const pages: [string, Page][] = [
  ['password', passwordPage(hostile, { status: 401, error: TITLE })],
  ['crawler', crawlerPage(hostile)],
  ['masking', maskingPage(hostile, 'javascript:alert(1)')],
  ['masking (real destination)', maskingPage(hostile, 'https://example.com/"><script>alert(1)</script>')],
  ['interstitial', interstitial(false)],
  ['interstitial with GDPR', interstitial(true)],
]

for (const [name, page] of pages) {
  t.test(`${name} page: nothing injected`, async (t) => {
    const { scripts, handlers, scriptUrls } = activeContent(page.html)
    const expected = name.startsWith('interstitial') ? 2 : 0
    t.equal(scripts.length, expected * 2, 'only the page’s own scripts (counted with and without scripting)')
    t.same(handlers, [], 'no event-handler attribute')
    t.same(scriptUrls, [], 'no javascript: URL')
    t.notMatch(page.html, /<script>alert/i)
    t.notMatch(page.html, /<img src=x/i)
    const title = byTag(page.html, 'title')[0].text
    if (name !== 'password') t.equal(title, TITLE, 'the title is read back exactly as given')
  })
}

t.test('the crawler page carries the hostile values as plain text and leaves the bad image out', async (t) => {
  const page = crawlerPage(hostile)
  t.equal(meta(page.html, 'og:title'), TITLE)
  t.equal(meta(page.html, 'og:description'), DESCRIPTION)
  t.equal(meta(page.html, 'og:image'), undefined, 'javascript: is not an image address')
  t.equal(byTag(page.html, 'p')[0].text, DESCRIPTION)
})

t.test('the masking page frames nothing for a non-http destination and uses no bad favicon', async (t) => {
  const page = maskingPage(hostile, 'javascript:alert(1)')
  t.equal(byTag(page.html, 'iframe').length, 0)
  t.equal(byTag(page.html, 'link').find((l) => l.attrs.rel === 'icon')?.attrs.href, 'data:,')
  t.notMatch(page.csp, /javascript/)
})

t.test('pixel values reach the page script only as data, unchanged', async (t) => {
  const page = interstitial(false)
  const block = byTag(page.html, 'script').find((script) => script.attrs.type === 'application/json')!
  const data = JSON.parse(block.text)
  for (const pixel of data.pixels) t.same(pixel.ids, PIXEL_VALUES.map((value) => value.trim()), pixel.platform)
  t.notMatch(block.text, /[<>\u2028\u2029]/)
  for (const pixel of data.pixels) {
    for (const src of pixel.scripts) t.match(new URL(src).protocol, 'https:', src)
  }
  t.equal(data.destination, 'https://example.com/?q=%22%3E%3Cscript%3Ealert(1)%3C/script%3E')
})

t.test('a destination that is not http(s) gets no link, no refresh and no redirect target', async (t) => {
  const page = interstitialPage({ link: hostile, destination: 'javascript:alert(1)', pixels: [], scripts: [], showGDPR: false, appLink: null })
  t.same(activeContent(page.html).scriptUrls, [])
  t.equal(JSON.parse(byTag(page.html, 'script')[0].text).destination, null)
  t.notOk(byTag(page.html, 'meta', { scripting: false }).some((m) => m.attrs['http-equiv']))
})
