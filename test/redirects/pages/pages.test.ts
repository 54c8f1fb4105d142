/** Each visitor page: status, what the visitor reads, the meta tags, and its Content-Security-Policy. */
import t, { type Test } from 'tap'
import {
  crawlerPage,
  expiredPage,
  maskingPage,
  notFoundPage,
  passwordPage,
  type Page,
  type PageLink,
} from '../../../src/redirects/pages/index.js'
import { byTag, meta, parseCsp } from './parse.js'

const link: PageLink = {
  title: 'Summer sale',
  description: 'Everything half price',
  image: 'https://cdn.example.com/summer.png',
  favicon: 'https://static.example.com/favicon.ico',
  shortUrl: 'https://go.acme.test/summer',
}
const bare: PageLink = { title: null, description: null, image: null, favicon: null, shortUrl: 'https://go.acme.test/bare' }

const nonceOf = (page: Page) => /'nonce-([^']+)'/.exec(page.csp)?.[1]

/** What every page has: a doctype, UTF-8, a viewport for phones, a style allowed by the page's nonce. */
function checkDocument(t: Test, page: Page) {
  t.match(page.html, /^<!doctype html>\n<html lang="en">/)
  t.equal(byTag(page.html, 'meta').find((m) => m.attrs.charset)?.attrs.charset, 'utf-8')
  t.equal(meta(page.html, 'viewport'), 'width=device-width, initial-scale=1')
  const nonce = nonceOf(page)
  t.ok(nonce && nonce.length >= 22, 'a nonce of 128 bits')
  t.same(byTag(page.html, 'style').map((style) => style.attrs.nonce), [nonce])
  const csp = parseCsp(page.csp)
  t.same(csp['default-src'], ["'none'"])
  t.same(csp['base-uri'], ["'none'"])
  t.same(csp['frame-ancestors'], ["'none'"])
  t.same(csp['style-src'], [`'nonce-${nonce}'`])
}

t.test('404 and 410: a sentence each, no script, nothing loaded', async (t) => {
  for (const [page, status, heading] of [[notFoundPage(), 404, 'Link not found'], [expiredPage(), 410, 'This link has expired']] as const) {
    t.equal(page.status, status)
    checkDocument(t, page)
    t.equal(byTag(page.html, 'h1')[0].text, heading)
    t.equal(byTag(page.html, 'title')[0].text, heading)
    t.equal(byTag(page.html, 'script').length, 0)
    t.equal(page.csp, `default-src 'none'; style-src 'nonce-${nonceOf(page)}'; img-src data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'`)
  }
})

t.test('every render has a fresh nonce', async (t) => {
  const nonces = new Set(Array.from({ length: 20 }, () => nonceOf(notFoundPage())))
  t.equal(nonces.size, 20)
})

t.test('password form: posts to the same address, one password field, no title or description shown', async (t) => {
  const page = passwordPage(link, { status: 200 })
  t.equal(page.status, 200)
  checkDocument(t, page)
  const [form] = byTag(page.html, 'form')
  t.equal(form.attrs.method, 'post')
  t.notOk('action' in form.attrs, 'no action: the form posts to the address it was served from')
  t.equal(form.attrs.enctype, 'application/x-www-form-urlencoded')
  const inputs = byTag(page.html, 'input')
  t.same(inputs.map((input) => [input.attrs.name, input.attrs.type]), [['password', 'password']])
  t.match(page.html, /go\.acme\.test\/summer/)
  t.notMatch(page.html, /Summer sale|half price/, 'what the password protects is not shown')
  t.equal(byTag(page.html, 'script').length, 0)
  t.notOk(byTag(page.html, 'p').some((p) => p.attrs.role === 'alert'), 'no error the first time')
  // The answer to the POST redirects to a destination, which may redirect again anywhere: Chromium checks
  // form-action on every one of those redirects.
  t.same(parseCsp(page.csp)['form-action'], ["'self'", 'https:', 'http:'])
})

t.test('password form after a wrong password: 401 and the message', async (t) => {
  const page = passwordPage(link, { status: 401 })
  t.equal(page.status, 401)
  const alert = byTag(page.html, 'p').find((p) => p.attrs.role === 'alert')
  t.equal(alert?.text, 'That password is not right. Try again.')
  t.equal(byTag(page.html, 'input')[0].attrs['aria-invalid'], 'true')
  t.same(parseCsp(page.csp)['form-action'], ["'self'", 'https:', 'http:'])
  const custom = passwordPage(link, { status: 401, error: 'Wrong <b>password</b>' })
  t.equal(byTag(custom.html, 'p').find((p) => p.attrs.role === 'alert')?.text, 'Wrong <b>password</b>')
})

t.test('crawler page: the link preview tags, the text for people, no script and no redirect', async (t) => {
  const page = crawlerPage(link)
  t.equal(page.status, 200)
  checkDocument(t, page)
  t.equal(meta(page.html, 'og:title'), 'Summer sale')
  t.equal(meta(page.html, 'og:description'), 'Everything half price')
  t.equal(meta(page.html, 'description'), 'Everything half price')
  t.equal(meta(page.html, 'og:image'), 'https://cdn.example.com/summer.png')
  t.equal(meta(page.html, 'og:url'), 'https://go.acme.test/summer')
  t.equal(meta(page.html, 'twitter:card'), 'summary_large_image')
  t.equal(meta(page.html, 'twitter:image'), 'https://cdn.example.com/summer.png')
  t.equal(byTag(page.html, 'title')[0].text, 'Summer sale')
  t.equal(byTag(page.html, 'h1')[0].text, 'Summer sale')
  t.equal(byTag(page.html, 'script').length, 0)
  t.notOk(byTag(page.html, 'meta').some((m) => m.attrs['http-equiv']), 'no refresh')
  t.notOk(parseCsp(page.csp)['script-src'], 'no script-src: nothing may run')
})

t.test('crawler page of a link without metadata: the short address as title, a summary card, no empty tags', async (t) => {
  const page = crawlerPage(bare)
  t.equal(meta(page.html, 'og:title'), 'go.acme.test/bare')
  t.equal(meta(page.html, 'twitter:card'), 'summary')
  for (const key of ['og:description', 'og:image', 'description', 'twitter:image']) t.equal(meta(page.html, key), undefined, key)
  t.equal(meta(page.html, 'og:url'), 'https://go.acme.test/bare')
})

t.test('masking page: a frame of the destination over the whole viewport, titled, with favicon and OG tags', async (t) => {
  const page = maskingPage(link, 'https://example.com:8443/landing?utm=x')
  t.equal(page.status, 200)
  const [frame] = byTag(page.html, 'iframe')
  t.equal(frame.attrs.src, 'https://example.com:8443/landing?utm=x')
  t.equal(byTag(page.html, 'title')[0].text, 'Summer sale')
  t.equal(byTag(page.html, 'link').find((l) => l.attrs.rel === 'icon')?.attrs.href, 'https://static.example.com/favicon.ico')
  t.equal(meta(page.html, 'og:title'), 'Summer sale')
  t.equal(meta(page.html, 'og:url'), 'https://go.acme.test/summer')
  const style = byTag(page.html, 'style')[0].text
  t.match(style, /iframe \{[^}]*width: 100vw; height: 100vh;[^}]*border: 0;/)
  t.equal(byTag(page.html, 'script').length, 0)
  const csp = parseCsp(page.csp)
  t.same(csp['frame-src'], ['https:'], 'any https origin: the destination may move to another host')
  t.same(csp['img-src'], ['data:', 'https://static.example.com'], 'the favicon')
  t.same(csp['frame-ancestors'], ["'none'"])
  t.notOk(csp['script-src'])
})

t.test('masking page without title or favicon: the short address as title, an empty icon', async (t) => {
  const page = maskingPage(bare, 'http://example.com/')
  t.equal(byTag(page.html, 'title')[0].text, 'go.acme.test/bare')
  t.equal(byTag(page.html, 'link').find((l) => l.attrs.rel === 'icon')?.attrs.href, 'data:,')
  t.same(parseCsp(page.csp)['frame-src'], ['http:', 'https:'])
  t.same(parseCsp(page.csp)['img-src'], ['data:'])
})
