/**
 * QR codes (issue 11, item 5): GET /v1/links/{uniqId}/qr with a token and GET /<slug>/qr on the short domains.
 * Every image is decoded back (jsQR; PNG read with pngjs, SVG rasterised with resvg) to the link's short address.
 */
import { Resvg } from '@resvg/resvg-js'
import jsQRModule from 'jsqr'
import { PNG } from 'pngjs'
import type { LightMyRequestResponse } from 'fastify'
import { setImmediate as nextTurn } from 'node:timers/promises'
import t from 'tap'
import type { Visit, VisitRecorder } from '../../src/redirects/visits.js'
import { apiClient } from '../support/api-client.js'
import { DrawBudget } from '../../src/qr/draw-budget.js'
import { buildTestApp, createWorkspaceToken, json } from '../support/test-app.js'
import { acmeWorkspace, SHORT_DOMAIN, visit } from '../redirects/visit-support.js'

// jsqr is CommonJS: imported from ESM its whole exports object arrives, whose `default` is the decoder.
const jsQR = jsQRModule.default

const recorded: Visit[] = []
const recorder: VisitRecorder = { record: (visit) => void recorded.push(visit) }
const first = await buildTestApp(t, { redirects: { visits: recorder } })
const { app, prisma } = first
const { token, link } = await acmeWorkspace(first)
const summer = await link({ id: 'Summer', url: 'https://example.com/summer-sale' })
const SUMMER_URL = `https://${SHORT_DOMAIN}/Summer`
const api = apiClient(app, token)
const qr = (query = '', uniq: number | string = summer.uniq) => api.get(`/v1/links/${uniq}/qr${query}`)

interface Raster {
  width: number
  height: number
  /** RGBA, row by row. */
  pixels: Uint8Array
}

function readPng(response: LightMyRequestResponse): Raster {
  const png = PNG.sync.read(response.rawPayload)
  return { width: png.width, height: png.height, pixels: png.data }
}

function rasterise(svg: string): Raster {
  const image = new Resvg(svg).render()
  return { width: image.width, height: image.height, pixels: image.pixels }
}

function decode({ width, height, pixels }: Raster): string | undefined {
  return jsQR(new Uint8ClampedArray(pixels), width, height)?.data
}

/** What a response holds, decoded: the address in the code. */
const decoded = (response: LightMyRequestResponse) =>
  decode(response.headers['content-type'] === 'image/png' ? readPng(response) : rasterise(response.body))

const pixel = ({ width, pixels }: Raster, x: number, y: number) => [...pixels.subarray((y * width + x) * 4, (y * width + x) * 4 + 4)]

/**
 * Where an SVG's code sits, read off its first row of modules: the top-left finder pattern (7 modules wide) gives
 * the quiet zone's width and the pixels per module; the top-right one, where the row ends, the modules across.
 */
function geometry(svg: string): { offset: number; unit: number; modules: number } {
  const runs = [...svg.matchAll(/M(\d+) (\d+)h(\d+)v(\d+)/g)].map((match) => match.slice(1).map(Number))
  const [offset, top, width] = runs[0]
  const unit = width / 7
  const lastOfRow = runs.filter(([, y]) => y === top).at(-1)!
  return { offset, unit, modules: (lastOfRow[0] - offset) / unit + 7 }
}

t.test('the default: an SVG of the short address, with the slug as it was given', async (t) => {
  const response = await qr()
  t.equal(response.statusCode, 200)
  t.equal(response.headers['content-type'], 'image/svg+xml')
  t.equal(response.headers['cache-control'], 'private, max-age=300')
  t.match(response.headers.etag, /^"[\w-]+"$/)
  t.match(response.body, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" width="300" height="300" /)
  t.equal(decoded(response), SUMMER_URL)
})

t.test('format=png: a PNG of the short address, 300 pixels square by default', async (t) => {
  const response = await qr('?format=png')
  t.equal(response.statusCode, 200)
  t.equal(response.headers['content-type'], 'image/png')
  const image = readPng(response)
  t.same([image.width, image.height], [300, 300])
  t.equal(decode(image), SUMMER_URL)
})

t.test('size is the whole image in pixels, exactly, margin included', async (t) => {
  for (const size of [64, 101, 512, 2048]) {
    const png = readPng(await qr(`?format=png&size=${size}`))
    t.same([png.width, png.height], [size, size], `PNG ${size}`)
    const svg = (await qr(`?size=${size}`)).body
    t.match(svg, new RegExp(`^<svg [^>]*width="${size}" height="${size}"`), `SVG ${size}`)
    if (size >= 101) {
      t.equal(decode(png), SUMMER_URL, `PNG ${size} decodes`)
      t.equal(decode(rasterise(svg)), SUMMER_URL, `SVG ${size} decodes`)
    }
  }
})

t.test('margin is the quiet zone in modules around the code, at least; every module is the same whole number of pixels', async (t) => {
  const { modules } = geometry((await qr()).body)
  for (const [size, margin] of [[300, 4], [300, 0], [600, 16], [134, 4], [2048, 1]]) {
    const { offset, unit } = geometry((await qr(`?size=${size}&margin=${margin}`)).body)
    t.ok(Number.isInteger(unit), `size ${size}, margin ${margin}: ${unit} pixels a module`)
    t.equal(unit, Math.floor(size / (modules + 2 * margin)), 'the most whole pixels a module that fit with the margin')
    t.ok(offset >= margin * unit, `a quiet zone of ${margin} modules and the pixels left over (${offset} px)`)
    t.ok(Math.abs(size - 2 * offset - modules * unit) <= 1, 'the code centred')
  }
  const unit = Math.ceil(64 / modules)
  t.match((await qr(`?size=${unit * modules}&margin=0`)).body, `d="M0 0h${7 * unit}v${unit}h-${7 * unit}z`, 'a size of whole modules, no margin: the finder pattern at the corner')
  const bare = readPng(await qr(`?format=png&margin=0&size=${modules * 8}`))
  t.same(pixel(bare, 0, 0), [0, 0, 0, 255], 'margin=0: the corner pixel is the finder pattern')
  const framed = readPng(await qr('?format=png&margin=4'))
  t.same(pixel(framed, 0, 0), [255, 255, 255, 255], 'margin=4: the corner pixel is quiet zone')
  t.equal(decode(framed), SUMMER_URL)
  t.equal(decode(readPng(await qr('?format=png&margin=16&size=600'))), SUMMER_URL)
})

t.test('each error correction level decodes; higher levels take more modules', async (t) => {
  const sizes: number[] = []
  for (const level of ['L', 'M', 'Q', 'H']) {
    const svg = await qr(`?level=${level}`)
    t.equal(svg.statusCode, 200, level)
    t.equal(decoded(svg), SUMMER_URL, `SVG at ${level}`)
    t.equal(decoded(await qr(`?level=${level}&format=png`)), SUMMER_URL, `PNG at ${level}`)
    sizes.push(geometry(svg.body).modules)
  }
  t.same([...sizes].sort((a, b) => a - b), sizes, 'never fewer modules at a higher level')
  t.ok(sizes[3] > sizes[0], `H has more modules than L (${sizes.join(', ')})`)
})

t.test('color and background are applied, with or without #, alpha included', async (t) => {
  const svg = await qr('?color=%23993300&background=FFFFCC')
  t.equal(svg.statusCode, 200)
  t.match(svg.body, /<rect width="\d+" height="\d+" fill="#ffffcc"\/><path fill="#993300" d="M/)
  t.equal(decoded(svg), SUMMER_URL)

  const png = readPng(await qr('?format=png&color=993300&background=%23ffffcc'))
  t.same(pixel(png, 0, 0), [255, 255, 204, 255], 'the margin is the background')
  // The top-left finder pattern's outer ring: module (0, 0), where the quiet zone ends.
  const at = geometry(svg.body).offset
  t.same(pixel(png, at, at), [0x99, 0x33, 0x00, 255], 'the dark modules are the colour')
  t.equal(decode(png), SUMMER_URL)

  const transparent = await qr('?format=png&background=ffffff00')
  t.same(pixel(readPng(transparent), 0, 0)[3], 0, 'a background with alpha 00 is transparent')
  t.match((await qr('?background=ffffff00')).body, /<rect [^>]*fill="#ffffff" fill-opacity="0\.000"\/>/)
  t.match((await qr('?color=00000080')).body, /<path fill="#000000" fill-opacity="0\.502" d=/)

  const inverted = await qr('?format=png&color=ffffff&background=000000')
  t.equal(inverted.statusCode, 200, 'light on dark is allowed')
  t.same(pixel(readPng(inverted), 0, 0), [0, 0, 0, 255])
})

t.test('colours too alike to scan are refused, naming both', async (t) => {
  for (const query of ['?color=eeeeee', '?color=ffff00', '?color=336699&background=336699', '?color=00000010', '?background=000000']) {
    const response = await qr(query)
    t.equal(response.statusCode, 400, query)
    t.equal(json(response).code, 'validation_failed')
    t.same(json(response).errors.map((error: { path: string }) => error.path), ['/color', '/background'], query)
    t.match(json(response).detail, /too little contrast/)
  }
})

t.test('each bad parameter is a 400 problem naming it', async (t) => {
  const cases: [string, string][] = [
    ['size=63', '/size'],
    ['size=2049', '/size'],
    ['size=300.5', '/size'],
    ['size=1e2', '/size'],
    ['size=big', '/size'],
    ['margin=-1', '/margin'],
    ['margin=-0', '/margin'],
    ['margin=17', '/margin'],
    ['margin=2.5', '/margin'],
    ['level=X', '/level'],
    ['level=m', '/level'],
    ['color=fff', '/color'],
    ['color=red', '/color'],
    ['color=%23ff00zz', '/color'],
    ['background=12345', '/background'],
    ['background=%23%23ffffff', '/background'],
    ['format=gif', '/format'],
    ['format=SVG', '/format'],
  ]
  for (const [query, path] of cases) {
    for (const request of [() => qr(`?${query}`), () => visit(app, `/summer/qr?${query}`)]) {
      const response = await request()
      t.equal(response.statusCode, 400, query)
      t.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8')
      t.equal(json(response).code, 'validation_failed', query)
      t.same(json(response).errors.map((error: { path: string }) => error.path), [path], query)
    }
  }
  t.match(json(await qr('?format=gif')).errors[0].message, /svg, png/)
  t.match(json(await qr('?level=X')).errors[0].message, /L, M, Q, H/)
})

t.test('a long address at level H decodes at every size from two to three pixels a module, PNG and SVG', async (t) => {
  // Modules scaled to uneven widths (2 and 3 pixels side by side) were misread at these sizes.
  const long = await link({ id: 'L' + 'x'.repeat(63) })
  const address = `https://${SHORT_DOMAIN}/${long.id}`
  for (const size of [85, 89, 90, 100, 109, 117, 127, 134, 150]) {
    t.equal(decoded(await qr(`?format=png&level=H&size=${size}`, long.uniq)), address, `PNG ${size}`)
    t.equal(decoded(await qr(`?level=H&size=${size}`, long.uniq)), address, `SVG ${size}`)
  }
})

t.test('a size that would give a module less than a pixel is a 400 naming /size', async (t) => {
  const long = await link({ id: 'x'.repeat(64) })
  const response = await qr('?size=64&level=H&margin=16', long.uniq)
  t.equal(response.statusCode, 400)
  t.same(json(response).errors.map((error: { path: string }) => error.path), ['/size'])
  t.match(json(response).errors[0].message, /^must be at least \d+ for this link at level H with a margin of 16/)
  const least = Number(/at least (\d+)/.exec(json(response).errors[0].message)![1])
  t.equal((await qr(`?size=${least}&level=H&margin=16&format=png`, long.uniq)).statusCode, 200, 'the size it names is enough')

  // A refusal is no image: nothing may cache it, and no If-None-Match may turn it into a 304.
  const tooSmall = `/${long.id}/qr?size=64&level=H&margin=16`
  for (const [route, send] of [
    ['api', (headers: Record<string, string>) =>
      app.inject({ url: `/v1/links/${long.uniq}/qr?size=64&level=H&margin=16`, headers: { 'api-authorization': token, ...headers } })],
    ['public', (headers: Record<string, string>) => visit(app, tooSmall, { headers })],
  ] as const) {
    const refused = await send({})
    t.equal(refused.statusCode, 400, route)
    t.equal(refused.headers.etag, undefined, `${route}: no ETag`)
    t.notMatch(String(refused.headers['cache-control'] ?? ''), /max-age=300/, `${route}: not cacheable as an image`)
    for (const ifNoneMatch of ['*', String(response.headers.etag ?? '"x"')]) {
      t.equal((await send({ 'if-none-match': ifNoneMatch })).statusCode, 400, `${route}: If-None-Match ${ifNoneMatch}`)
    }
  }
})

t.test('unknown links, other workspaces and missing tokens', async (t) => {
  const missing = await qr('', 999_999)
  t.equal(missing.statusCode, 404)
  t.equal(missing.headers['content-type'], 'application/problem+json; charset=utf-8')
  t.equal(json(missing).code, 'not_found')

  const other = apiClient(app, await createWorkspaceToken(prisma, { workspace: 'other', domains: ['go.other.test'] }))
  const theirs = await other.get(`/v1/links/${summer.uniq}/qr`)
  t.equal(theirs.statusCode, 404, "another workspace's link is not found")
  t.equal(json(theirs).code, 'not_found')

  const anonymous = await app.inject({ url: `/v1/links/${summer.uniq}/qr` })
  t.equal(anonymous.statusCode, 401)
  t.equal(json(anonymous).code, 'unauthorized')

  const badUniq = await qr('', 'abc')
  t.equal(badUniq.statusCode, 400)
  t.same(json(badUniq).errors.map((error: { path: string }) => error.path), ['/uniqId'])
})

t.test('by domain and slug: the same image, the slug in any case; a slug or domain with no such link is a 404', async (t) => {
  const byUniq = await qr()
  const byDomain = await api.get(`/v1/links/by-domain/${SHORT_DOMAIN}/summer/qr`)
  t.equal(byDomain.statusCode, 200)
  t.equal(byDomain.headers['content-type'], 'image/svg+xml')
  t.equal(byDomain.headers['cache-control'], 'private, max-age=300')
  t.equal(byDomain.body, byUniq.body, 'the code of the same address')
  t.equal(decoded(byDomain), SUMMER_URL)
  const png = await api.get(`/v1/links/by-domain/${SHORT_DOMAIN}/SUMMER/qr?format=png&size=200`)
  t.equal(png.headers['content-type'], 'image/png')
  t.equal(decoded(png), SUMMER_URL)
  t.equal((await api.get(`/v1/links/by-domain/${SHORT_DOMAIN}/nothing-here/qr`)).statusCode, 404)
  t.equal((await api.get(`/v1/links/by-domain/go.other.test/summer/qr`)).statusCode, 404)
  const bad = await api.get(`/v1/links/by-domain/${SHORT_DOMAIN}/summer/qr?margin=99`)
  t.equal(bad.statusCode, 400)
  t.same(json(bad).errors.map((error: { path: string }) => error.path), ['/margin'])
  t.equal((await app.inject({ url: `/v1/links/by-domain/${SHORT_DOMAIN}/summer/qr` })).statusCode, 401)
})

t.test('the API route is a read: no write quota counts it or speaks of it', async (t) => {
  const response = await qr()
  t.equal(response.statusCode, 200)
  t.notOk(response.headers.ratelimit, 'no RateLimit header')
  t.notOk(response.headers['x-ratelimit-remaining'], 'no X-RateLimit-Remaining header')
  const update = await app.inject({
    method: 'PUT',
    url: `/v1/links/${summer.uniq}`,
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload: JSON.stringify({ link: {}, autofill: false }),
  })
  t.ok(update.headers.ratelimit, 'a write route does have the quota headers')
})

t.test('ETag: the same image has the same tag, If-None-Match gets a 304 without a body', async (t) => {
  const first = await qr('?format=png')
  const again = await qr('?format=png')
  t.equal(first.headers.etag, again.headers.etag)
  t.not((await qr('?format=png&size=301')).headers.etag, first.headers.etag, 'another size, another tag')
  t.not((await qr()).headers.etag, first.headers.etag, 'another format, another tag')
  const conditional = await app.inject({
    url: `/v1/links/${summer.uniq}/qr?format=png`,
    headers: { 'api-authorization': token, 'if-none-match': `"other", W/${first.headers.etag}` },
  })
  t.equal(conditional.statusCode, 304)
  t.equal(conditional.body, '')
  t.equal(conditional.headers.etag, first.headers.etag)
  const stale = await app.inject({ url: `/v1/links/${summer.uniq}/qr`, headers: { 'api-authorization': token, 'if-none-match': '"other"' } })
  t.equal(stale.statusCode, 200)
})

t.test('the public route on a short domain: the same image, cacheable by anyone', async (t) => {
  const svg = await visit(app, '/Summer/qr')
  t.equal(svg.statusCode, 200)
  t.equal(svg.headers['content-type'], 'image/svg+xml')
  t.equal(svg.headers['cache-control'], 'public, max-age=300')
  t.equal(svg.headers['x-content-type-options'], 'nosniff')
  t.match(svg.headers['content-security-policy'], /^default-src 'none'/)
  t.equal(decoded(svg), SUMMER_URL)
  t.equal(svg.body, (await qr()).body, 'the API draws the same SVG')

  const png = await visit(app, '/Summer/qr?format=png&size=400&level=Q')
  t.equal(png.headers['content-type'], 'image/png')
  t.same([readPng(png).width, readPng(png).height], [400, 400])
  t.equal(decoded(png), SUMMER_URL)
})

t.test('slugs match in any case; the code holds the slug as it was given', async (t) => {
  for (const path of ['/summer/qr', '/SUMMER/qr', '/sUmMeR/qr?format=png']) {
    const response = await visit(app, path)
    t.equal(response.statusCode, 200, path)
    t.equal(decoded(response), SUMMER_URL, path)
  }
  t.equal((await visit(app, '/summer/qr', { host: 'GO.ACME.TEST:8080' })).statusCode, 200, 'Host in any case, with a port')
})

t.test('an unknown slug is the visitors\' 404 page', async (t) => {
  const withoutNonce = (html: string) => html.replace(/nonce-[\w+/=-]+|nonce="[^"]+"/g, 'NONCE')
  const page = await visit(app, '/nothing-here')
  for (const path of ['/nothing-here/qr', '/not.a.slug/qr', `/${'x'.repeat(65)}/qr`]) {
    const response = await visit(app, path)
    t.equal(response.statusCode, 404, path)
    t.equal(response.headers['content-type'], 'text/html; charset=utf-8')
    t.equal(response.headers['cache-control'], 'private, no-store')
    t.equal(withoutNonce(response.body), withoutNonce(page.body), `${path}: the same page as /nothing-here`)
  }
})

t.test("on a host that is no short domain, /<slug>/qr is the API's problem+json 404, whatever the query", async (t) => {
  for (const path of ['/summer/qr', '/summer/qr?size=1', '/nothing/qr']) {
    const response = await visit(app, path, { host: 'api.example.com' })
    t.equal(response.statusCode, 404, path)
    t.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8')
    t.equal(json(response).code, 'not_found')
  }
})

t.test('HEAD answers what GET would, without a body', async (t) => {
  const get = await visit(app, '/summer/qr?format=png')
  const head = await visit(app, '/summer/qr?format=png', { method: 'HEAD' })
  t.equal(head.statusCode, 200)
  t.equal(head.body, '')
  for (const header of ['content-type', 'content-length', 'etag', 'cache-control']) {
    t.equal(head.headers[header], get.headers[header], header)
  }
  const missing = await visit(app, '/nothing-here/qr', { method: 'HEAD' })
  t.equal(missing.statusCode, 404)
  t.equal(missing.body, '')
  const apiHead = await app.inject({ method: 'HEAD', url: `/v1/links/${summer.uniq}/qr`, headers: { 'api-authorization': token } })
  t.equal(apiHead.statusCode, 200)
  t.equal(apiHead.headers['content-type'], 'image/svg+xml')
  t.equal(apiHead.body, '')
})

t.test('fetching a code is no visit: nothing recorded or counted', async (t) => {
  const counters = { ...app.redirects.counters }
  recorded.length = 0
  t.equal((await visit(app, '/summer/qr')).statusCode, 200)
  t.equal((await visit(app, '/nothing-here/qr')).statusCode, 404)
  await nextTurn()
  t.same(recorded, [], 'no visit handed on')
  t.same(app.redirects.counters, counters, 'no visit counted')
  // The recorder does see a visit of the link itself.
  t.equal((await visit(app, '/summer')).statusCode, 302)
  await nextTurn()
  t.equal(recorded.length, 1)
})

t.test('the public route logs nothing per request at info level; the API does', async (t) => {
  const lines: { msg: string; req?: { url: string }; level: number }[] = []
  const logged = await buildTestApp(t, {
    database: first.database,
    logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } },
  })
  await logged.app.redirects.domains.refresh()
  lines.length = 0
  t.equal((await visit(logged.app, '/summer/qr')).statusCode, 200)
  t.equal((await visit(logged.app, '/summer/qr?size=1')).statusCode, 400)
  t.equal((await visit(logged.app, '/nothing/qr')).statusCode, 404)
  t.same(lines, [], 'no line for the public route')
  t.equal((await apiClient(logged.app, token).get(`/v1/links/${summer.uniq}/qr`)).statusCode, 200)
  t.ok(lines.some((line) => line.req?.url === `/v1/links/${summer.uniq}/qr`), 'the API route logs its request (the logger works)')
})

t.test('a deleted link has no code any more', async (t) => {
  const gone = await link({ id: 'gone' })
  t.equal((await visit(app, '/gone/qr')).statusCode, 200)
  t.equal((await api.delete(`/v1/links/${gone.uniq}`)).statusCode, 204)
  t.equal((await qr('', gone.uniq)).statusCode, 404)
  t.equal((await visit(app, '/gone/qr')).statusCode, 404)
})

t.test('drawing has a budget per second, shared by both routes: past it a 503 with Retry-After: 1, a 304 still answered', async (t) => {
  // A clock that moves 3 ms at each reading: every draw is charged 3 ms; the budget is 5 ms a second.
  let now = 0
  const budget = new DrawBudget(5, () => (now += 3))
  const limited = await buildTestApp(t, { qrDrawing: budget })
  const { token: limitedToken, link: limitedLink } = await acmeWorkspace(limited)
  const winter = await limitedLink({ id: 'Winter', url: 'https://example.com/winter' })
  const apiQr = () => apiClient(limited.app, limitedToken).get(`/v1/links/${winter.uniq}/qr?format=png`)
  const first = await apiQr()
  t.equal(first.statusCode, 200)
  t.equal((await visit(limited.app, '/Winter/qr?format=png&size=400')).statusCode, 200, 'the public route: 6 ms spent')
  for (const refused of [await apiQr(), await visit(limited.app, '/Winter/qr?size=500')]) {
    t.equal(refused.statusCode, 503)
    t.equal(refused.headers['retry-after'], '1')
    t.equal(refused.headers['cache-control'], 'no-store', 'no cache keeps the refusal as the image')
    t.equal(refused.headers.etag, undefined, 'nor does it carry the tag of an image it does not hold')
    t.match(refused.json(), { code: 'unavailable', detail: /QR codes/ })
  }
  const cached = await limited.app.inject({
    url: `/v1/links/${winter.uniq}/qr?format=png`,
    headers: { 'api-authorization': limitedToken, 'if-none-match': first.headers.etag as string },
  })
  t.equal(cached.statusCode, 304, 'a client that has the image is answered: nothing is drawn')
  t.equal(budget.refused, 2)
  now += 1000
  t.equal((await apiQr()).statusCode, 200, 'the next second draws again')
})
