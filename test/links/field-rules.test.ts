/**
 * Contract section 5, rule by rule: a rejected example (400 naming the field by JSON pointer, nothing
 * stored) and an accepted one (stored in normal form).
 */
import t from 'tap'
import { buildTestApp, client, createWorkspaceToken } from '../support/test-app.js'

const { app, prisma } = await buildTestApp(t)
const token = await createWorkspaceToken(prisma, { workspace: 'rules', defaultDomain: 'go.rules.test', domains: ['alt.rules.test'] })
const { id: workspaceId } = await prisma.workspace.findUniqueOrThrow({ where: { name: 'rules' } })
const otherToken = await createWorkspaceToken(prisma, { workspace: 'other', defaultDomain: 'go.other.test' })
const { id: otherWorkspaceId } = await prisma.workspace.findUniqueOrThrow({ where: { name: 'other' } })
const api = client(app, token)
const base = { url: 'https://example.com/' }
const long = (n: number) => 'x'.repeat(n)

async function storedCounts() {
  return {
    links: await prisma.link.count(),
    pixels: await prisma.pixel.count(),
    linkPixels: await prisma.linkPixel.count(),
  }
}

interface Rejection {
  name: string
  link: Record<string, unknown>
  errors: { path: string; message: RegExp | string }[]
  code?: string
}

const rejections: Rejection[] = [
  { name: 'url is required on create', link: { title: 'x' }, errors: [{ path: '/link/url', message: 'is required' }] },
  ...['javascript:alert(1)', 'data:text/html,hi', 'ftp://example.com/', 'example.com/path', 'https://exa mple.com/', 'http://', 'https:///path'].map(
    (url): Rejection => ({ name: `url ${url}`, link: { url }, errors: [{ path: '/link/url', message: 'must be an absolute http(s) URL' }] }),
  ),
  { name: 'url over 4096 characters', link: { url: `https://example.com/${long(4090)}` }, errors: [{ path: '/link/url', message: /http\(s\) URL|4096/ }] },
  { name: 'image must be a URL', link: { ...base, image: 'not a url' }, errors: [{ path: '/link/image', message: /absolute http\(s\) URL/ }] },
  { name: 'favicon must be http(s)', link: { ...base, favicon: 'ftp://example.com/x.ico' }, errors: [{ path: '/link/favicon', message: /absolute http\(s\) URL/ }] },
  { name: 'title over 512', link: { ...base, title: long(513) }, errors: [{ path: '/link/title', message: /512/ }] },
  { name: 'title of the wrong type', link: { ...base, title: 5 }, errors: [{ path: '/link/title', message: 'must be a string or null' }] },
  { name: 'description over 2048', link: { ...base, description: long(2049) }, errors: [{ path: '/link/description', message: /2048/ }] },
  { name: 'note over 4096', link: { ...base, note: long(4097) }, errors: [{ path: '/link/note', message: /4096/ }] },
  { name: 'tag over 64', link: { ...base, tags: ['ok', long(65)] }, errors: [{ path: '/link/tags/1', message: /64/ }] },
  { name: 'tag over 64 in a comma string', link: { ...base, tags: `ok,${long(65)}` }, errors: [{ path: '/link/tags', message: /64/ }] },
  { name: 'more than 50 tags', link: { ...base, tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, errors: [{ path: '/link/tags', message: /at most 50/ }] },
  { name: 'tags of the wrong type', link: { ...base, tags: 5 }, errors: [{ path: '/link/tags', message: 'must be an array or a string' }] },
  { name: 'folderId of another workspace', link: { ...base, folderId: 'OTHER_FOLDER' }, errors: [{ path: '/link/folderId', message: 'is not a folder of this workspace' }] },
  { name: 'folderId that does not exist', link: { ...base, folderId: 999999 }, errors: [{ path: '/link/folderId', message: 'is not a folder of this workspace' }] },
  { name: 'folderId beyond any id', link: { ...base, folderId: '99999999999999999999' }, errors: [{ path: '/link/folderId', message: 'is not a folder of this workspace' }] },
  { name: 'folderId not digits', link: { ...base, folderId: '12a' }, errors: [{ path: '/link/folderId', message: 'must be a string of digits' }] },
  { name: 'folderId of the wrong type', link: { ...base, folderId: true }, errors: [{ path: '/link/folderId', message: 'must be an integer, a string of digits or null' }] },
  { name: 'pixel platform outside the eleven', link: { ...base, pixels: [{ platform: 'myspace', value: '1' }] }, errors: [{ path: '/link/pixels/0/platform', message: /must be one of: linkedin, facebook/ }] },
  { name: 'pixel without value', link: { ...base, pixels: [{ platform: 'ga' }] }, errors: [{ path: '/link/pixels/0/value', message: 'is required' }] },
  { name: 'pixel with a blank value', link: { ...base, pixels: [{ platform: 'ga', value: '' }, { platform: 'ga', value: ' \t' }] }, errors: [{ path: '/link/pixels/0/value', message: 'must not be blank' }, { path: '/link/pixels/1/value', message: 'must not be blank' }] },
  { name: 'unknown pixel UUID', link: { ...base, pixels: ['7d444840-9dc0-11d1-b245-5ffdce74fad2'] }, errors: [{ path: '/link/pixels/0', message: 'is not a pixel of this workspace' }] },
  { name: 'pixel UUID of another workspace', link: { ...base, pixels: ['OTHER_PIXEL'] }, errors: [{ path: '/link/pixels/0', message: 'is not a pixel of this workspace' }] },
  { name: 'pixel that is neither object nor UUID', link: { ...base, pixels: ['not-a-uuid'] }, errors: [{ path: '/link/pixels/0', message: 'must be a UUID' }] },
  { name: 'more than 50 pixels', link: { ...base, pixels: Array.from({ length: 51 }, (_, i) => ({ platform: 'ga', value: `UA-${i}` })) }, errors: [{ path: '/link/pixels', message: /50/ }] },
  { name: 'geolocation code that is not ISO 3166-1', link: { ...base, extraOptionsGeolocations: [{ url: 'https://example.com/x', value: 'XX' }] }, errors: [{ path: '/link/extraOptionsGeolocations/0/value', message: 'must be an ISO 3166-1 alpha-2 country code' }] },
  { name: 'geolocation code of letters that upper-case to ASCII', link: { ...base, extraOptionsGeolocations: [{ url: 'https://example.com/x', value: '\u0131t' }, { url: 'https://example.com/y', value: '\u017Fe' }] }, errors: [{ path: '/link/extraOptionsGeolocations/0/value', message: 'must be an ISO 3166-1 alpha-2 country code' }, { path: '/link/extraOptionsGeolocations/1/value', message: 'must be an ISO 3166-1 alpha-2 country code' }] },
  { name: 'geolocation code given twice', link: { ...base, extraOptionsGeolocations: [{ url: 'https://example.com/a', value: 'DE' }, { url: 'https://example.com/b', value: 'de' }] }, errors: [{ path: '/link/extraOptionsGeolocations/1/value', message: /second time/ }] },
  { name: 'geolocation url not http(s)', link: { ...base, extraOptionsGeolocations: [{ url: 'javascript:alert(1)', value: 'DE' }] }, errors: [{ path: '/link/extraOptionsGeolocations/0/url', message: 'must be an absolute http(s) URL' }] },
  { name: 'more than 250 geolocations', link: { ...base, extraOptionsGeolocations: Array.from({ length: 251 }, () => ({ url: 'https://example.com/', value: 'DE' })) }, errors: [{ path: '/link/extraOptionsGeolocations', message: /250/ }] },
  { name: 'rotator weight 0', link: { ...base, extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: 0 }] }, errors: [{ path: '/link/extraOptionsLinkRotator/0/value', message: 'must be >= 1' }] },
  { name: 'rotator weight "150"', link: { ...base, extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: '150' }] }, errors: [{ path: '/link/extraOptionsLinkRotator/0/value', message: 'must be a weight from 1 to 100' }] },
  { name: 'rotator weight "1000"', link: { ...base, extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: '1000' }] }, errors: [{ path: '/link/extraOptionsLinkRotator/0/value', message: 'must be a weight from 1 to 100' }] },
  { name: 'rotator weight "-5"', link: { ...base, extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: '-5' }] }, errors: [{ path: '/link/extraOptionsLinkRotator/0/value', message: /string of digits/ }] },
  { name: 'rotator weight 12.5', link: { ...base, extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: 12.5 }] }, errors: [{ path: '/link/extraOptionsLinkRotator/0/value', message: /integer/ }] },
  { name: 'rotator weights over 100', link: { ...base, extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: 60 }, { url: 'https://example.com/b', value: '50' }] }, errors: [{ path: '/link/extraOptionsLinkRotator', message: /add up to 110/ }] },
  { name: 'more than 20 rotator entries', link: { ...base, extraOptionsLinkRotator: Array.from({ length: 21 }, () => ({ url: 'https://example.com/', value: 1 })) }, errors: [{ path: '/link/extraOptionsLinkRotator', message: /20/ }] },
  { name: 'linkScripts of another workspace', link: { ...base, linkScripts: ['OTHER_SCRIPT'] }, errors: [{ path: '/link/linkScripts/0', message: 'is not a script of this workspace' }] },
  { name: 'linkScripts not integers', link: { ...base, linkScripts: ['a'] }, errors: [{ path: '/link/linkScripts/0', message: 'must be an integer' }] },
  { name: 'linkExpiration without end', link: { ...base, linkExpiration: { enable: true, url: 'https://example.com/x', timezone: 0 } }, errors: [{ path: '/link/linkExpiration/end', message: 'is required' }] },
  { name: 'linkExpiration end not a date', link: { ...base, linkExpiration: { enable: true, end: 'tomorrow', url: 'https://example.com/x', timezone: 0 } }, errors: [{ path: '/link/linkExpiration/end', message: 'must be an ISO 8601 date-time' }] },
  { name: 'linkExpiration url not http(s)', link: { ...base, linkExpiration: { enable: true, end: '2027-01-01T00:00:00Z', url: 'mailto:a@b.c', timezone: 0 } }, errors: [{ path: '/link/linkExpiration/url', message: 'must be an absolute http(s) URL' }] },
  { name: 'linkExpiration timezone 15', link: { ...base, linkExpiration: { enable: true, end: '2027-01-01T00:00:00Z', url: 'https://example.com/x', timezone: 15 } }, errors: [{ path: '/link/linkExpiration/timezone', message: /14/ }] },
  { name: 'linkExpiration timezone -13', link: { ...base, linkExpiration: { enable: true, end: '2027-01-01T00:00:00Z', url: 'https://example.com/x', timezone: -13 } }, errors: [{ path: '/link/linkExpiration/timezone', message: /-12/ }] },
  { name: 'password protection enabled without a password', link: { ...base, passwordProtect: { enable: true } }, errors: [{ path: '/link/passwordProtect/password', message: /required/ }] },
  { name: 'empty password', link: { ...base, passwordProtect: { enable: true, password: '' } }, errors: [{ path: '/link/passwordProtect/password', message: /fewer than 1/ }] },
  { name: 'password over 128', link: { ...base, passwordProtect: { enable: true, password: long(129) } }, errors: [{ path: '/link/passwordProtect/password', message: /128/ }] },
  { name: 'boolean given as a string', link: { ...base, showGDPR: 'true' }, errors: [{ path: '/link/showGDPR', message: 'must be a boolean' }] },
  { name: 'slug with a dot', link: { ...base, id: 'summer.sale' }, errors: [{ path: '/link/id', message: 'may contain only letters A-Z and a-z, digits, - and _' }] },
  { name: 'slug over 64', link: { ...base, id: long(65) }, errors: [{ path: '/link/id', message: /64/ }] },
  { name: 'a NUL character in a string', link: { ...base, title: 'a\u0000b', pixels: [{ platform: 'ga', value: 'UA\u0000' }] }, errors: [{ path: '/link/title', message: 'must not contain NUL characters' }, { path: '/link/pixels/0/value', message: 'must not contain NUL characters' }] },
  { name: 'empty slug', link: { ...base, id: '' }, errors: [{ path: '/link/id', message: /fewer than 1/ }] },
  {
    name: 'a NUL character beside fields the schema refuses: each is named',
    link: { ...base, url: 'javascript:x', title: 'a\u0000', tags: 5, showGDPR: 'yes' },
    errors: [
      { path: '/link/title', message: 'must not contain NUL characters' },
      { path: '/link/url', message: 'must be an absolute http(s) URL' },
      { path: '/link/tags', message: /must be/ },
      { path: '/link/showGDPR', message: 'must be a boolean' },
    ],
  },
]

const otherFolder = await prisma.folder.create({ data: { workspaceId: otherWorkspaceId, name: 'theirs' } })
const otherPixel = await prisma.pixel.create({ data: { workspaceId: otherWorkspaceId, platform: 'ga', value: 'UA-OTHER' } })
const otherScript = await prisma.script.create({ data: { workspaceId: otherWorkspaceId, name: 's', content: 'x' } })
const placeholders: Record<string, unknown> = {
  OTHER_FOLDER: otherFolder.id,
  OTHER_PIXEL: otherPixel.id,
  OTHER_SCRIPT: otherScript.id,
}
const fill = (value: unknown): unknown =>
  typeof value === 'string' && value in placeholders
    ? placeholders[value]
    : Array.isArray(value)
      ? value.map(fill)
      : value && typeof value === 'object'
        ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v)]))
        : value

for (const rejection of rejections) {
  t.test(`rejected: ${rejection.name}`, async (t) => {
    const before = await storedCounts()
    const response = await api.create(fill(rejection.link) as Record<string, unknown>)
    t.equal(response.statusCode, 400)
    t.match(response.headers['content-type'], /^application\/problem\+json/)
    const body = response.json()
    t.equal(body.code, rejection.code ?? 'validation_failed')
    t.match(body, { type: 'about:blank', title: 'Bad Request', status: 400, detail: String })
    for (const expected of rejection.errors) {
      t.ok(
        body.errors.some((error: { path: string; message: string }) =>
          error.path === expected.path &&
          (typeof expected.message === 'string' ? error.message === expected.message : expected.message.test(error.message)),
        ),
        `names ${expected.path}`,
        { errors: body.errors },
      )
    }
    t.same(await storedCounts(), before, 'nothing is stored')
  })
}

t.test('a 400 names every offending field at once', async (t) => {
  const response = await api.create({ url: 'ftp://x', title: 7, tags: 5, pixels: [{ platform: 'foo', value: '1' }] })
  t.equal(response.statusCode, 400)
  t.same(
    response.json().errors.map((error: { path: string }) => error.path).sort(),
    ['/link/pixels/0/platform', '/link/tags', '/link/title', '/link/url'],
  )
  t.match(response.json().detail, /link\/url must be an absolute http\(s\) URL/)
})

t.test('a 400 names the fields of the rules and of the domain together, on a create, a bulk and an update', async (t) => {
  const paths = (response: { json(): { errors: { path: string }[] } }) => response.json().errors.map((error) => error.path).sort()
  const before = await storedCounts()
  // A folder that does not exist (the rules' check) and a domain that is no host name (the domain's).
  const created = await api.create({ url: 'https://example.com/', domain: '..', folderId: 99999, id: 'both-wrong' })
  t.equal(created.statusCode, 400)
  t.same(paths(created), ['/link/domain', '/link/folderId'])
  const bulk = await app.inject({
    method: 'POST',
    url: '/v1/links/bulk',
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload: { autofill: false, links: [{ url: 'https://example.com/', domain: '..', folderId: 99999 }] },
  })
  t.equal(bulk.statusCode, 200)
  t.same(bulk.json().results[0].problem.errors.map((error: { path: string }) => error.path).sort(), ['/links/0/domain', '/links/0/folderId'])
  t.same(await storedCounts(), before, 'nothing is stored')
  // A 403 of a domain the workspace may not use is answered alone, as before, not mixed with field problems.
  const reserved = await api.create({ url: 'https://example.com/', domain: 'short.test', folderId: 99999 })
  t.equal(reserved.statusCode, 400, 'the rules come first: their 400')
  t.same(paths(reserved), ['/link/folderId'])

  const link = (await api.create({ url: 'https://example.com/', id: 'identity' }, { autofill: false })).json()
  const updated = await api.update(link.uniq, { id: 'other', domain: 'alt.rules.test', folderId: 99999 })
  t.equal(updated.statusCode, 400)
  t.same(paths(updated), ['/link/domain', '/link/folderId', '/link/id'], 'the identity change and the rules, all named')
  t.same((await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).folderId, null, 'nothing changed')
})

t.test('a redirect loop and a reserved slug are named with the other fields; alone, each keeps its own code', async (t) => {
  const paths = (response: { json(): { errors: { path: string }[] } }) => response.json().errors.map((error) => error.path).sort()
  const before = await storedCounts()
  const loop = "https://go.rules.test/x"
  // Review core: each stage answered alone, so a client fixing the named field met a 400 for another.
  const cases: [Record<string, unknown>, string, string[]][] = [
    [{ url: 'https://example.com/x', title: 'ok', folderId: 99999, id: 'v1' }, 'validation_failed', ['/link/folderId', '/link/id']],
    [{ url: loop, folderId: 99999 }, 'validation_failed', ['/link/folderId', '/link/url']],
    [{ url: loop, id: 'docs' }, 'validation_failed', ['/link/id', '/link/url']],
    [{ url: loop }, 'redirect_loop', ['/link/url']],
    [{ url: 'https://example.com/x', id: 'docs' }, 'slug_reserved', ['/link/id']],
  ]
  for (const [link, code, expected] of cases) {
    const response = await api.create(link, { autofill: false })
    t.equal(response.statusCode, 400, JSON.stringify(link))
    t.equal(response.json().code, code, `${JSON.stringify(link)}: ${code}`)
    t.same(paths(response), expected, `${JSON.stringify(link)}: every field named`)
  }
  const bulk = await app.inject({
    method: 'POST',
    url: '/v1/links/bulk',
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload: { autofill: false, links: [{ url: loop, id: 'docs', folderId: 99999 }] },
  })
  t.same(bulk.json().results[0].problem.errors.map((error: { path: string }) => error.path).sort(), ['/links/0/folderId', '/links/0/id', '/links/0/url'])
  t.same(await storedCounts(), before, 'nothing is stored')
})

t.test('accepted: tolerant and normalised inputs', async (t) => {
  const folder = await prisma.folder.create({ data: { workspaceId, name: 'mine' } })
  const pixel = await prisma.pixel.create({ data: { workspaceId, platform: 'gtm', value: 'GTM-1' } })
  const script = await prisma.script.create({ data: { workspaceId, name: 'mine', content: 'x' } })
  const response = await api.create({
    url: 'HTTPS://Example.com/Path?q=1#frag',
    image: '',
    favicon: 'http://example.com/favicon.ico',
    title: 'x'.repeat(512),
    description: 'd'.repeat(2048),
    note: 'n'.repeat(4096),
    tags: ' summer , Email,,summer, SUMMER ,email ',
    folderId: String(folder.id),
    pixels: [pixel.id, { platform: 'ga', value: 'UA-1', workspaceId: 12345, createdAt: 'whenever' }, { id: pixel.id, platform: 'gtm', value: 'GTM-1' }],
    extraOptionsGeolocations: [{ url: 'https://example.de/', value: 'de' }, { url: 'https://example.fr/', value: 'Fr' }],
    extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: '0030' }, { url: 'https://example.com/b', value: 60 }, { url: 'https://example.com/c', value: '007' }],
    linkScripts: [script.id],
    linkExpiration: { enable: false, end: '2027-06-01T12:00:00+02:00', url: 'https://example.com/gone', timezone: -12 },
    passwordProtect: { enable: false },
  })
  t.equal(response.statusCode, 201, response.body)
  const record = response.json()
  t.equal(record.url, 'HTTPS://Example.com/Path?q=1#frag', 'the destination is kept as given')
  t.equal(record.image, null, 'an empty image is stored as null')
  t.same(record.tags, ['summer', 'Email'], 'trimmed, empty dropped, duplicates removed case-insensitively, first spelling kept')
  t.equal(record.folderId, folder.id, 'a folderId string of digits is accepted')
  t.same(record.pixels.map((p: { id: string }) => p.id).filter((id: string) => id === pixel.id).length, 1, 'a pixel named twice is kept once')
  t.equal(record.pixels.length, 2)
  t.match(record.pixels[1], { platform: 'ga', value: 'UA-1', workspaceId })
  t.same(record.extraOptionsGeolocations.map((g: { value: string }) => g.value), ['DE', 'FR'], 'codes stored upper-case')
  t.same(record.extraOptionsLinkRotator.map((r: { value: number }) => r.value), [30, 60, 7], 'weights stored as integers, leading zeros and all')
  t.same(record.linkExpiration, { enable: false, end: '2027-06-01T10:00:00.000Z', url: 'https://example.com/gone', timezone: -12 })
  t.same(record.passwordProtect, { enable: false })
})

t.test('accepted: a leap second (23:59:60, which RFC 3339 allows) is the first instant of the next minute', async (t) => {
  const link = { url: 'https://example.com/leap', linkExpiration: { enable: true, end: '2030-06-30T18:59:60.5-05:00', url: 'https://example.com/gone', timezone: -5 } }
  const response = await api.create(link)
  t.equal(response.statusCode, 201, response.body)
  t.equal(response.json().linkExpiration.end, '2030-07-01T00:00:00.000Z')
})

t.test('accepted: a pixel object without id reuses the workspace pixel with the same platform and value', async (t) => {
  const first = await api.create({ ...base, pixels: [{ platform: 'bing', value: 'B-1' }] })
  const second = await api.create({ ...base, pixels: [{ platform: 'bing', value: 'B-1' }] })
  t.equal(first.statusCode, 201)
  t.equal(second.statusCode, 201)
  t.equal(first.json().pixels[0].id, second.json().pixels[0].id)
  t.equal(await prisma.pixel.count({ where: { workspaceId, platform: 'bing', value: 'B-1' } }), 1)
})

t.test('accepted: a pixel object with an id the workspace does not have is matched by platform and value', async (t) => {
  const response = await api.create({ ...base, pixels: [{ id: otherPixel.id, platform: 'ga', value: 'UA-OTHER' }] })
  t.equal(response.statusCode, 201)
  const [pixel] = response.json().pixels
  t.not(pixel.id, otherPixel.id, "another workspace's pixel is never used")
  t.equal(pixel.workspaceId, workspaceId)
})

t.test('accepted: rotator weights adding up to exactly 100, 20 entries, 250 geolocations, 50 tags and pixels', async (t) => {
  const countries = ['DE', 'FR', 'US', 'GB', 'IT']
  const response = await api.create({
    ...base,
    extraOptionsLinkRotator: Array.from({ length: 20 }, (_, i) => ({ url: `https://example.com/${i}`, value: 5 })),
    extraOptionsGeolocations: countries.map((value) => ({ url: 'https://example.com/geo', value })),
    tags: Array.from({ length: 50 }, (_, i) => `tag${i}`),
    pixels: Array.from({ length: 50 }, (_, i) => ({ platform: 'adroll', value: `AR-${i}` })),
  })
  t.equal(response.statusCode, 201, response.body)
  t.equal(response.json().extraOptionsLinkRotator.length, 20)
  t.equal(response.json().tags.length, 50)
  t.equal(response.json().pixels.length, 50)
})

t.test('redirect loops: a destination on a short domain of this service is refused', async (t) => {
  const cases: [Record<string, unknown>, string][] = [
    [{ url: 'https://go.rules.test/abc' }, '/link/url'],
    [{ url: 'https://SHORT.test/abc' }, '/link/url'],
    [{ url: 'https://go.other.test/abc' }, '/link/url'],
    [{ ...base, extraOptionsLinkRotator: [{ url: 'https://alt.rules.test/x', value: 10 }] }, '/link/extraOptionsLinkRotator/0/url'],
    [{ ...base, extraOptionsGeolocations: [{ url: 'https://official.test/x', value: 'DE' }] }, '/link/extraOptionsGeolocations/0/url'],
    [{ ...base, linkExpiration: { enable: true, end: '2027-01-01T00:00:00Z', url: 'https://go.rules.test/x', timezone: 0 } }, '/link/linkExpiration/url'],
  ]
  for (const [link, path] of cases) {
    const before = await storedCounts()
    const response = await api.create(link)
    t.equal(response.statusCode, 400)
    t.equal(response.json().code, 'redirect_loop')
    t.equal(response.json().errors[0].path, path)
    t.same(await storedCounts(), before)
  }
  t.equal((await api.create({ url: 'https://sub.go.rules.test/abc' })).statusCode, 201, 'another host is fine')
})

t.test('redirect loops: every looping destination is named', async (t) => {
  const response = await api.create({
    url: 'https://go.rules.test/abc',
    extraOptionsGeolocations: [{ url: 'https://example.com/de', value: 'DE' }, { url: 'https://short.test/fr', value: 'FR' }],
    extraOptionsLinkRotator: [{ url: 'https://alt.rules.test/x', value: 10 }],
  })
  t.equal(response.statusCode, 400)
  t.equal(response.json().code, 'redirect_loop')
  t.same(
    response.json().errors.map((error: { path: string }) => error.path),
    ['/link/url', '/link/extraOptionsGeolocations/1/url', '/link/extraOptionsLinkRotator/0/url'],
  )
  t.match(response.json().detail, /link\/url points to go\.rules\.test.*; link\/extraOptionsGeolocations\/1\/url points to short\.test/)
})

void otherToken

t.test('past the 50 a 400 lists, the count of the rest counts each field once, whatever found it', async (t) => {
  const geolocations = Array.from({ length: 80 }, () => ({ url: 'nota\u0000url', value: 'FR' }))
  const response = await api.create({ url: 'https://example.com/', extraOptionsGeolocations: geolocations })
  t.equal(response.statusCode, 400)
  const body = response.json()
  t.equal(body.errors.length, 50)
  t.match(body.detail, /and 30 more/, '80 URLs refused in all, each once')
})
