/**
 * The evaluation order of contract section 11, step by step, and the answer of each step: status, Location,
 * Cache-Control, Content-Type, CSP and what the page holds.
 */
import t from 'tap'
import { buildTestApp, client } from '../support/test-app.js'
import { acmeWorkspace, ANDROID_PHONE, DESKTOP, FACEBOOK_CRAWLER, IPHONE, pageHeaders, SHORT_DOMAIN, visit } from './visit-support.js'

const T = Date.UTC(2031, 5, 1, 12, 0, 0)
let now = T
const first = await buildTestApp(t, { redirects: { now: () => now } })
const { app, prisma } = first
const { token, link } = await acmeWorkspace(first)
t.beforeEach(() => {
  now = T
})

const PAGE = { type: 'text/html; charset=utf-8', cacheControl: 'private, no-store', hasCsp: true, location: undefined }
const expiration = (end: number, url: string | null = 'https://example.com/expired') => ({
  linkExpiration: { enable: true, end: new Date(end).toISOString(), url, timezone: 0 },
})

t.test('1. no such link, or a deleted one: the 404 page', async (t) => {
  t.match(pageHeaders(await visit(app, '/never-made')), { status: 404, ...PAGE })
  const created = await link({ id: 'short-lived' })
  t.equal((await visit(app, '/short-lived')).statusCode, 302)
  t.equal((await client(app, token).send('POST', '/v1/links/create', {})).statusCode, 400)
  const deleted = await app.inject({ method: 'DELETE', url: `/v1/links/${created.uniq}`, headers: { 'api-authorization': token } })
  t.equal(deleted.statusCode, 204)
  const response = await visit(app, '/short-lived')
  t.match(pageHeaders(response), { status: 404, ...PAGE })
  t.match(response.body, /<html/)
})

t.test('2. expired (now ≥ end): 302 to linkExpiration.url; the edge instant is expired', async (t) => {
  await link({ id: 'sale', url: 'https://example.com/sale', ...expiration(T + 60_000) })
  now = T + 59_999
  t.equal((await visit(app, '/sale')).headers.location, 'https://example.com/sale', 'a millisecond before the end')
  now = T + 60_000
  const expired = await visit(app, '/sale?utm=x')
  t.equal(expired.statusCode, 302)
  t.equal(expired.headers.location, 'https://example.com/expired', 'the expiration url as stored')
  t.equal(expired.headers['cache-control'], 'private, max-age=0')
  now = T + 3_600_000
  t.equal((await visit(app, '/sale')).headers.location, 'https://example.com/expired')
})

t.test('2. expired without a url (null or absent): the 410 page', async (t) => {
  const withNull = await link({ id: 'gone', ...expiration(T - 1, null) })
  const { url: _url, ...withoutUrl } = expiration(T - 1).linkExpiration
  const absent = await link({ id: 'gone-too', linkExpiration: withoutUrl })
  for (const created of [withNull, absent]) {
    t.equal(created.linkExpiration.url, null, 'the record says there is no url')
    const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: created.uniq } })
    t.equal(stored.expirationUrl, null)
    const response = await visit(app, `/${created.id}`)
    t.match(pageHeaders(response), { status: 410, ...PAGE })
    t.match(response.body, /expired/i)
  }
})

t.test('2. an expiration that is not enabled never expires', async (t) => {
  await link({ id: 'not-enabled', url: 'https://example.com/on', linkExpiration: { enable: false, end: new Date(T - 1).toISOString(), url: 'https://example.com/expired', timezone: 0 } })
  t.equal((await visit(app, '/not-enabled')).headers.location, 'https://example.com/on')
})

t.test('3. password: the form, which comes after expiration and before crawlers', async (t) => {
  await link({ id: 'secret', passwordProtect: { enable: true, password: 'open sesame' } })
  for (const userAgent of [DESKTOP, FACEBOOK_CRAWLER]) {
    const response = await visit(app, '/secret', { headers: { 'user-agent': userAgent } })
    t.match(pageHeaders(response), { status: 200, ...PAGE })
    t.match(response.body, /<form method="post"/)
    t.match(response.body, /name="password"/)
    t.match(response.body, /maxlength="256"/, 'the field takes the longest password the API does (128 emoji), no more')
    t.notMatch(response.body, /og:title/, 'the crawler gets the form, not the preview')
  }
  await link({ id: 'secret-expired', passwordProtect: { enable: true, password: 'open sesame' }, ...expiration(T) })
  t.equal((await visit(app, '/secret-expired')).headers.location, 'https://example.com/expired', 'expiration comes first')
  await link({ id: 'secret-off', url: 'https://example.com/free', passwordProtect: { enable: false, password: 'unused' } })
  t.equal((await visit(app, '/secret-off')).headers.location, 'https://example.com/free', 'protection that is off asks nothing')
})

t.test('4. crawlers get the preview page: OG tags, no pixel, no script, no redirect; expiration still comes first', async (t) => {
  await link({
    id: 'preview',
    title: 'Summer sale',
    description: 'Half price',
    image: 'https://cdn.example.com/sale.png',
    pixels: [{ platform: 'facebook', value: '1234567890' }],
  })
  for (const userAgent of [FACEBOOK_CRAWLER, 'Twitterbot/1.0', 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)', 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)']) {
    const response = await visit(app, '/preview', { headers: { 'user-agent': userAgent } })
    t.match(pageHeaders(response), { status: 200, ...PAGE }, userAgent)
    t.match(response.body, /<meta property="og:title" content="Summer sale">/)
    t.match(response.body, /<meta property="og:image" content="https:\/\/cdn\.example\.com\/sale\.png">/)
    t.match(response.body, /<meta property="og:url" content="https:\/\/go\.acme\.test\/preview">/)
    t.match(response.body, /twitter:card/)
    t.notMatch(response.body, /1234567890|fbq|connect\.facebook\.net/, 'no pixel')
    t.notMatch(response.body, /http-equiv="refresh"|example\.com\/landing/, 'no way onwards')
  }
  await link({ id: 'preview-expired', ...expiration(T) })
  t.equal((await visit(app, '/preview-expired', { headers: { 'user-agent': FACEBOOK_CRAWLER } })).statusCode, 302)
})

t.test('6. masking: the destination in a full-page frame, before any interstitial', async (t) => {
  await link({ id: 'masked', url: 'https://shop.example.net/item', title: 'Our shop', masking: true, pixels: [{ platform: 'facebook', value: '42' }] })
  const response = await visit(app, '/masked?ref=mail')
  t.match(pageHeaders(response), { status: 200, ...PAGE })
  t.match(response.body, /<iframe src="https:\/\/shop\.example\.net\/item\?ref=mail"/)
  t.match(response.body, /<title>Our shop<\/title>/)
  t.match(response.headers['content-security-policy'], /frame-src https:;/)
  t.notMatch(response.body, /fbq/, 'masking wins over the pixels')
  t.notMatch(response.headers['content-security-policy'], /script-src/, 'an https frame needs no script')
})

t.test('6. masking an http: destination: not over HTTPS, where a browser would show a blank page', async (t) => {
  const proxied = await buildTestApp(t, { database: first.database, env: { TRUST_PROXY: '127.0.0.1' } })
  await link({ id: 'masked-http', url: 'http://legacy.example.net/item', masking: true })
  await link({ id: 'masked-http-pixel', url: 'http://legacy.example.net/tracked', masking: true, pixels: [{ platform: 'facebook', value: '42' }] })
  const overHttps = { headers: { 'x-forwarded-proto': 'https' } }

  const redirected = await visit(proxied.app, '/masked-http?ref=mail', overHttps)
  t.equal(redirected.statusCode, 302, 'over HTTPS: the link as it would be without masking')
  t.equal(redirected.headers.location, 'http://legacy.example.net/item?ref=mail')
  const interstitial = await visit(proxied.app, '/masked-http-pixel', overHttps)
  t.match(pageHeaders(interstitial), { status: 200, ...PAGE })
  t.match(interstitial.body, /fbq/, 'with pixels: the interstitial, as without masking')
  t.notMatch(interstitial.body, /<iframe/)

  // Over plain HTTP the frame works; in case the visitor is on HTTPS all the same (a proxy that does not say so),
  // the page's one script leaves for the destination (tested in a browser: test/redirects/browser/pages.test.ts).
  for (const [target, headers] of [[proxied.app, { 'x-forwarded-proto': 'http' }], [app, { 'x-forwarded-proto': 'https' }]] as const) {
    const masked = await visit(target, '/masked-http', { headers })
    t.match(pageHeaders(masked), { status: 200, ...PAGE })
    t.match(masked.body, /<iframe src="http:\/\/legacy\.example\.net\/item"/)
    const nonce = /script-src 'nonce-([^']+)'/.exec(masked.headers['content-security-policy'] as string)?.[1]
    t.ok(nonce, 'the script is allowed by its nonce alone')
    t.match(masked.body, `<script nonce="${nonce}">if (location.protocol === 'https:') location.replace("http://legacy.example.net/item")</script>`)
  }
  // An untrusted sender's X-Forwarded-Proto (the second case above) changes nothing: still the masked page.
  t.equal((await visit(app, '/masked-http', overHttps)).statusCode, 200)
})

t.test('6. interstitial: pixels; scripts when enabled; a known app on a phone with deep linking', async (t) => {
  const pixels = await link({ id: 'tracked', url: 'https://example.com/tracked', pixels: [{ platform: 'facebook', value: '1234567890' }] })
  const tracked = await visit(app, '/tracked')
  t.match(pageHeaders(tracked), { status: 200, ...PAGE })
  t.match(tracked.body, /1234567890/)
  t.match(tracked.body, /https:\/\/example\.com\/tracked/)
  t.match(tracked.headers['content-security-policy'], /connect\.facebook\.net/)
  t.ok(pixels.uniq)

  const created = await app.inject({
    method: 'POST', url: '/v1/scripts', headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload: { name: 'Chat', content: '<script>window.chatWidget = 1</script>' },
  })
  t.equal(created.statusCode, 201)
  const scriptId = created.json().id
  await link({ id: 'scripted', linkScripts: [scriptId], linkScriptEnable: true })
  const scripted = await visit(app, '/scripted')
  t.equal(scripted.statusCode, 200)
  t.match(scripted.body, /window\.chatWidget = 1/)
  await link({ id: 'scripts-off', linkScripts: [scriptId], linkScriptEnable: false })
  t.equal((await visit(app, '/scripts-off')).statusCode, 302, 'scripts not enabled: a plain redirect')
  await link({ id: 'scripts-none', linkScripts: [], linkScriptEnable: true })
  t.equal((await visit(app, '/scripts-none')).statusCode, 302, 'enabled without scripts: a plain redirect')

  await link({ id: 'video', url: 'https://www.youtube.com/watch?v=dQw4w9WgXcQ', deepLinkingEnable: true })
  for (const userAgent of [IPHONE, ANDROID_PHONE]) {
    const phone = await visit(app, '/video', { headers: { 'user-agent': userAgent } })
    t.match(pageHeaders(phone), { status: 200, ...PAGE }, userAgent)
    t.match(phone.body, /youtube:\/\/|intent:\/\//)
  }
  const desktop = await visit(app, '/video')
  t.equal(desktop.statusCode, 302, 'deep linking on a desktop: a plain redirect')
  t.equal(desktop.headers.location, 'https://www.youtube.com/watch?v=dQw4w9WgXcQ')
  await link({ id: 'no-app', url: 'https://example.com/page', deepLinkingEnable: true })
  t.equal((await visit(app, '/no-app', { headers: { 'user-agent': IPHONE } })).statusCode, 302, 'no known app: a plain redirect')
  await link({ id: 'video-off', url: 'https://www.youtube.com/watch?v=dQw4w9WgXcQ' })
  t.equal((await visit(app, '/video-off', { headers: { 'user-agent': IPHONE } })).statusCode, 302, 'deep linking off')
})

t.test('6. GDPR: the interstitial with a consent banner, still no redirect of its own', async (t) => {
  await link({ id: 'consent', showGDPR: true, pixels: [{ platform: 'ga', value: 'G-ABCDEF1234' }] })
  const response = await visit(app, '/consent')
  t.match(pageHeaders(response), { status: 200, ...PAGE })
  t.match(response.body, /Accept/)
  t.match(response.body, /Decline/)
})

t.test('6. otherwise: 302 to the destination, Cache-Control private, max-age=0', async (t) => {
  await link({ id: 'plain', url: 'https://example.com/plain' })
  for (const method of ['GET', 'HEAD'] as const) {
    const response = await visit(app, '/plain', { method })
    t.equal(response.statusCode, 302)
    t.equal(response.headers.location, 'https://example.com/plain')
    t.equal(response.headers['cache-control'], 'private, max-age=0')
    t.equal(response.headers['content-security-policy'], undefined)
  }
})

t.test('the host decides the link: the same slug on another short domain is another link', async (t) => {
  const other = await buildTestApp(t, { database: first.database, redirects: { now: () => now } })
  const beta = await acmeWorkspace(other, 'beta', 'go.beta.test')
  await beta.link({ id: 'plain', url: 'https://beta.example.com/' })
  await other.app.redirects.domains.refresh()
  t.equal((await visit(other.app, '/plain', { host: 'go.beta.test' })).headers.location, 'https://beta.example.com/')
  t.equal((await visit(other.app, '/plain', { host: SHORT_DOMAIN })).headers.location, 'https://example.com/plain')
})
