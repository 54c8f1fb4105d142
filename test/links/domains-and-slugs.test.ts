/** Contract section 4: which domain a link goes on, who may use it, and the slug rules. */
import t from 'tap'
import { GENERATED_SLUG_LENGTH } from '../../src/links/slug.js'
import { buildTestApp, client, createWorkspaceToken, DEFAULT_DOMAIN, OFFICIAL_DOMAIN } from '../support/test-app.js'

const { app, prisma } = await buildTestApp(t)
const plainToken = await createWorkspaceToken(prisma, { workspace: 'plain' })
const brandToken = await createWorkspaceToken(prisma, {
  workspace: 'brand',
  domains: ['links.brand.test', 'xn--bcher-kva.test'],
  defaultDomain: 'go.brand.test',
})
const officialToken = await createWorkspaceToken(prisma, { workspace: 'integration', official: true })
const plain = client(app, plainToken)
const brand = client(app, brandToken)
const official = client(app, officialToken)
const url = 'https://example.com/'

t.test('no domain: the workspace default, else the service default', async (t) => {
  const onWorkspaceDefault = await brand.create({ url })
  t.equal(onWorkspaceDefault.statusCode, 201)
  t.equal(onWorkspaceDefault.json().domain, 'go.brand.test')

  const onServiceDefault = await official.create({ url })
  t.equal(onServiceDefault.json().domain, DEFAULT_DOMAIN)
})

t.test('a workspace left with two default domains by an older race: links go on the one added last', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'two-defaults', defaultDomain: 'first.two.test' })
  const workspace = await prisma.workspace.findUniqueOrThrow({ where: { name: 'two-defaults' } })
  await prisma.domain.create({ data: { host: 'second.two.test', workspaceId: workspace.id, isDefault: true } })
  const created = await client(app, token).create({ url })
  t.equal(created.statusCode, 201)
  t.equal(created.json().domain, 'second.two.test')
})

t.test('reserved domains need an official token, explicit or by default', async (t) => {
  for (const response of [await plain.create({ url }), await plain.create({ url, domain: OFFICIAL_DOMAIN }), await brand.create({ url, domain: DEFAULT_DOMAIN })]) {
    t.equal(response.statusCode, 403)
    t.match(response.headers['content-type'], /^application\/problem\+json/)
    t.equal(response.json().code, 'domain_reserved')
    t.match(response.json().detail, /workspace's domains/, 'the detail says how to proceed')
  }
  const allowed = await official.create({ url, domain: OFFICIAL_DOMAIN.toUpperCase() })
  t.equal(allowed.statusCode, 201)
  t.equal(allowed.json().domain, OFFICIAL_DOMAIN)
})

t.test('a link on a reserved domain: other tokens of its workspace may read it, not change or delete it', async (t) => {
  const colleagueToken = await createWorkspaceToken(prisma, { workspace: 'integration' })
  const colleague = client(app, colleagueToken)
  const as = (token: string, method: 'GET' | 'DELETE', path: string) => app.inject({ method, url: path, headers: { 'api-authorization': token } })
  const plainLink = (await official.create({ url, id: 'kept-plain', domain: OFFICIAL_DOMAIN }, { autofill: false })).json()
  // A tagged link is changed and deleted by the paths that move its group history: other ways in.
  const taggedLink = (await official.create({ url, id: 'kept-tagged', domain: OFFICIAL_DOMAIN, tags: ['t'] }, { autofill: false })).json()
  const stored = () => prisma.link.findMany({ where: { uniq: { in: [plainLink.uniq, taggedLink.uniq] } }, orderBy: { uniq: 'asc' } })
  const before = await stored()

  const attempts = {
    'update by uniq, autofill off (one statement)': () => colleague.update(plainLink.uniq, { title: 'changed' }, { autofill: false }),
    'update by uniq': () => colleague.update(plainLink.uniq, { title: 'changed' }),
    'update by domain': () => colleague.updateByDomain(OFFICIAL_DOMAIN, 'KEPT-plain', { note: 'changed' }),
    'update of a tagged link': () => colleague.update(taggedLink.uniq, { tags: ['other'] }, { autofill: false }),
    'delete by uniq': () => as(colleagueToken, 'DELETE', `/v1/links/${plainLink.uniq}`),
    'delete by domain': () => as(colleagueToken, 'DELETE', `/v1/links/by-domain/${OFFICIAL_DOMAIN}/kept-plain`),
    'delete of a tagged link': () => as(colleagueToken, 'DELETE', `/v1/links/${taggedLink.uniq}`),
  }
  for (const [name, attempt] of Object.entries(attempts)) {
    const response = await attempt()
    t.equal(response.statusCode, 403, name)
    t.equal(response.json().code, 'domain_reserved', name)
    t.match(response.json().detail, /only an official token/, name)
  }
  t.same(await stored(), before, 'both links stored as they were')
  t.equal((await as(colleagueToken, 'GET', `/v1/links/${plainLink.uniq}`)).statusCode, 200, 'reading is allowed')
  t.equal((await colleague.update(999_999, { title: 'x' }, { autofill: false })).statusCode, 404, 'no such link is still a 404')

  const changed = await official.update(plainLink.uniq, { title: 'by the integration' }, { autofill: false })
  t.equal(changed.statusCode, 200, 'the official token may change it')
  t.equal((await as(officialToken, 'DELETE', `/v1/links/${taggedLink.uniq}`)).statusCode, 204, 'and delete it')
})

t.test('a domain that is neither reserved nor the workspace\'s is 403 domain_not_allowed', async (t) => {
  for (const [api, domain] of [[plain, 'go.brand.test'], [brand, 'unknown.test'], [official, 'links.brand.test']] as const) {
    const before = await prisma.link.count()
    const response = await api.create({ url, domain })
    t.equal(response.statusCode, 403)
    t.equal(response.json().code, 'domain_not_allowed')
    t.equal(await prisma.link.count(), before)
  }
})

t.test('domains are compared lower-case and internationalised names stored as punycode', async (t) => {
  const upper = await brand.create({ url, domain: 'Links.Brand.TEST.' })
  t.equal(upper.statusCode, 201)
  t.equal(upper.json().domain, 'links.brand.test')
  const unicode = await brand.create({ url, domain: 'bücher.test', id: 'buch' })
  t.equal(unicode.statusCode, 201)
  t.equal(unicode.json().domain, 'xn--bcher-kva.test')
  t.equal(unicode.json().shortUrl, 'https://xn--bcher-kva.test/buch')
  const invalid = await brand.create({ url, domain: 'not a host!' })
  t.equal(invalid.statusCode, 400)
  t.equal(invalid.json().errors[0].path, '/link/domain')
  // A URL's host reader would cut these down to links.brand.test: a path, query or fragment is no host name.
  const before = await prisma.link.count()
  for (const domain of ['links.brand.test/', 'links.brand.test/evil', 'links.brand.test?x', 'links.brand.test#x', 'user@links.brand.test']) {
    const response = await brand.create({ url, domain })
    t.equal(response.statusCode, 400, domain)
    t.equal(response.json().errors[0].path, '/link/domain', domain)
  }
  t.equal(await prisma.link.count(), before, 'none stored')
})

t.test('the by-domain routes name a slug of the slug characters only: the Kelvin sign is no k', async (t) => {
  const kept = await brand.create({ url, domain: 'links.brand.test', id: 'kept' })
  t.equal(kept.statusCode, 201)
  const headers = { 'api-authorization': brandToken, 'content-type': 'application/json' }
  // U+212A KELVIN SIGN lower-cases to an ASCII k: matched in any case, it reached the link "kept".
  const kelvin = `/v1/links/by-domain/links.brand.test/${encodeURIComponent('\u212Aept')}`
  for (const [method, path, payload] of [
    ['GET', kelvin, undefined], ['GET', `${kelvin}/qr`, undefined], ['GET', `${kelvin}/stats`, undefined],
    ['PUT', kelvin, JSON.stringify({ link: { title: 'hijacked' } })], ['DELETE', kelvin, undefined],
  ] as const) {
    const response = await app.inject({ method, url: path, headers, payload })
    t.equal(response.statusCode, 404, `${method} ${path}`)
  }
  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: kept.json().uniq } })
  t.equal(stored.title, null, 'neither changed')
  t.equal((await app.inject({ url: '/v1/links/by-domain/links.brand.test/KEPT', headers })).statusCode, 200, 'ASCII case still matches')
})

t.test('slugs are unique per domain regardless of case; 409 slug_taken and nothing stored', async (t) => {
  t.equal((await brand.create({ url, id: 'Promo' })).statusCode, 201)
  const before = await prisma.link.count()
  for (const id of ['Promo', 'promo', 'PROMO']) {
    const response = await brand.create({ url, id, pixels: [{ platform: 'nexus', value: `n-${id}` }] })
    t.equal(response.statusCode, 409)
    t.match(response.headers['content-type'], /^application\/problem\+json/)
    t.match(response.json(), { code: 'slug_taken', status: 409 })
  }
  t.equal(await prisma.link.count(), before)
  t.equal(await prisma.pixel.count({ where: { platform: 'nexus' } }), 0, 'the pixel of a refused create is not left behind')
  const otherDomain = await brand.create({ url, id: 'promo', domain: 'links.brand.test' })
  t.equal(otherDomain.statusCode, 201, 'the same slug on another domain is another link')
  t.equal(otherDomain.json().id, 'promo', 'the slug is returned as given')
})

t.test("slugs that collide with the service's own paths are refused with 400 slug_reserved", async (t) => {
  for (const id of ['v1', 'V1', 'docs', 'healthz', 'readyz', 'metrics']) {
    const response = await brand.create({ url, id })
    t.equal(response.statusCode, 400, id)
    t.equal(response.json().code, 'slug_reserved')
    t.same(response.json().errors, [{ path: '/link/id', message: 'is reserved for the service' }])
  }
  for (const id of ['openapi.json', 'favicon.ico', 'robots.txt']) {
    t.equal((await brand.create({ url, id })).statusCode, 400, `${id} is refused (it is not even a valid slug)`)
  }
})

t.test('slugs of 1 and 64 characters of A-Z a-z 0-9 - _ are accepted', async (t) => {
  for (const id of ['a', 'Z', '_', '-', 'A-b_9', 'x'.repeat(64)]) {
    const response = await brand.create({ url, id })
    t.equal(response.statusCode, 201, id)
    t.equal(response.json().id, id)
  }
})

t.test('generated slugs: 7 characters of a-z0-9, all different', async (t) => {
  const slugs = new Set<string>()
  for (let i = 0; i < 30; i++) {
    const response = await brand.create({ url })
    t.equal(response.statusCode, 201)
    slugs.add(response.json().id)
  }
  t.equal(slugs.size, 30)
  for (const slug of slugs) t.match(slug, new RegExp(`^[a-z0-9]{${GENERATED_SLUG_LENGTH}}$`))
})

t.test('two concurrent creates of one slug: exactly one 201 and one 409, nothing half-written', async (t) => {
  for (let round = 0; round < 5; round++) {
    const id = `race-${round}`
    const linksBefore = await prisma.link.count()
    const responses = await Promise.all(
      ['A', 'B'].map((who) =>
        brand.create({ url: `https://example.com/${who}`, id: round % 2 ? id : id.toUpperCase(), pixels: [{ platform: 'gtm', value: `race-${round}` }] }),
      ),
    )
    t.same(responses.map((r) => r.statusCode).sort(), [201, 409], `round ${round}`)
    t.equal(await prisma.link.count(), linksBefore + 1)
    const winner = responses.find((r) => r.statusCode === 201)!.json()
    t.equal(await prisma.linkPixel.count({ where: { linkUniq: winner.uniq } }), 1)
    t.equal(await prisma.pixel.count({ where: { value: `race-${round}` } }), 1)
  }
})

t.test('many concurrent creates of one slug: exactly one succeeds', async (t) => {
  const responses = await Promise.all(Array.from({ length: 10 }, () => brand.create({ url, id: 'stampede' })))
  t.equal(responses.filter((r) => r.statusCode === 201).length, 1)
  t.equal(responses.filter((r) => r.statusCode === 409).length, 9)
})
