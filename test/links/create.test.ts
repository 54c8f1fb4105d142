import t from 'tap'
import { buildTestApp, client, createWorkspaceToken, DEFAULT_DOMAIN } from '../support/test-app.js'

const { app, prisma } = await buildTestApp(t)

const fullLink = {
  url: 'https://example.com/summer-sale',
  domain: 'go.acme.test',
  id: 'Summer',
  title: 'Summer sale',
  description: 'Everything half price',
  image: 'https://cdn.example.com/summer.png',
  favicon: 'https://example.com/favicon.ico',
  extraOptionsGeolocations: [{ url: 'https://example.de/sommer', value: 'de' }],
  extraOptionsLinkRotator: [{ url: 'https://example.com/b', value: 30 }],
  pixels: [{ platform: 'facebook', value: '1234567890', title: 'FB' }],
  showGDPR: true,
  tags: ['summer', 'email'],
  note: 'for the newsletter',
  deepLinkingEnable: true,
  linkScriptEnable: true,
  masking: true,
  linkExpiration: { enable: true, end: '2027-01-31T23:59:59+01:00', url: 'https://example.com/expired', timezone: 1 },
  passwordProtect: { enable: true, password: 'open sesame' },
}

t.test('create stores every field of the specification and answers the flat record', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'acme1', domains: ['go.acme.test'] })
  const { id: workspaceId } = await prisma.workspace.findUniqueOrThrow({ where: { name: 'acme1' } })
  const folder = await prisma.folder.create({ data: { workspaceId, name: 'Campaigns' } })
  const script = await prisma.script.create({ data: { workspaceId, name: 'chat', content: '<script></script>' } })

  const response = await client(app, token).create({ ...fullLink, folderId: folder.id, linkScripts: [script.id] })
  t.equal(response.statusCode, 201)
  t.match(response.headers['content-type'], /^application\/json/)
  const record = response.json()
  t.match(record, {
    uniq: Number,
    id: 'Summer',
    domain: 'go.acme.test',
    shortUrl: 'https://go.acme.test/Summer',
    url: 'https://example.com/summer-sale',
    title: 'Summer sale',
    description: 'Everything half price',
    image: 'https://cdn.example.com/summer.png',
    favicon: 'https://example.com/favicon.ico',
    extraOptionsGeolocations: [{ url: 'https://example.de/sommer', value: 'DE' }],
    extraOptionsLinkRotator: [{ url: 'https://example.com/b', value: 30 }],
    folderId: folder.id,
    showGDPR: true,
    tags: ['summer', 'email'],
    note: 'for the newsletter',
    deepLinkingEnable: true,
    linkScripts: [script.id],
    linkScriptEnable: true,
    masking: true,
    linkExpiration: { enable: true, end: '2027-01-31T22:59:59.000Z', url: 'https://example.com/expired', timezone: 1 },
    passwordProtect: { enable: true },
    workspaceId,
  })
  t.match(record.createdDate, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  t.equal(record.createdDate, record.updatedDate)
  t.equal(record.pixels.length, 1)
  t.match(record.pixels[0], { id: /^[0-9a-f-]{36}$/, platform: 'facebook', value: '1234567890', title: 'FB', workspaceId })
  t.notOk('password' in record.passwordProtect, 'the password is never returned')
  t.notOk(response.body.includes('open sesame'))

  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: record.uniq } })
  t.equal(stored.slug, 'Summer')
  t.equal(stored.slugKey, 'summer')
  t.match(stored.passwordHash, /^scrypt\$/, 'only a salted slow hash is stored')
  t.notOk(stored.passwordHash!.includes('open sesame'))
})

t.test('omitted optional fields take the defaults of the specification', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'acme2', defaultDomain: 'go2.acme.test' })
  const response = await client(app, token).create({ url: 'https://example.com/' })
  t.equal(response.statusCode, 201)
  const record = response.json()
  t.match(record.id, /^[a-z0-9]{7}$/, 'a 7-character slug is generated')
  t.same(
    {
      domain: record.domain,
      title: record.title,
      description: record.description,
      image: record.image,
      favicon: record.favicon,
      extraOptionsGeolocations: record.extraOptionsGeolocations,
      extraOptionsLinkRotator: record.extraOptionsLinkRotator,
      folderId: record.folderId,
      pixels: record.pixels,
      showGDPR: record.showGDPR,
      tags: record.tags,
      note: record.note,
      deepLinkingEnable: record.deepLinkingEnable,
      linkScripts: record.linkScripts,
      linkScriptEnable: record.linkScriptEnable,
      masking: record.masking,
      linkExpiration: record.linkExpiration,
      passwordProtect: record.passwordProtect,
    },
    {
      domain: 'go2.acme.test',
      title: null,
      description: null,
      image: null,
      favicon: null,
      extraOptionsGeolocations: [],
      extraOptionsLinkRotator: [],
      folderId: null,
      pixels: [],
      showGDPR: false,
      tags: [],
      note: null,
      deepLinkingEnable: false,
      linkScripts: null,
      linkScriptEnable: false,
      masking: false,
      linkExpiration: null,
      passwordProtect: null,
    },
  )
})

t.test('the minimal link of the specification, with empty strings and empty lists, is accepted', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'acme3', defaultDomain: 'go3.acme.test' })
  const response = await client(app, token).create({
    url: 'https://example.com/',
    title: '',
    description: '',
    pixels: [],
    showGDPR: false,
    extraOptionsLinkRotator: [],
    extraOptionsGeolocations: [],
    tags: [],
  })
  t.equal(response.statusCode, 201)
  t.match(response.json(), { title: '', description: '', tags: [] })
})

t.test('unknown fields are ignored, not rejected, and not stored', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'acme4', defaultDomain: 'go4.acme.test' })
  const response = await client(app, token).create(
    { url: 'https://example.com/', workspaceId: 999, uniq: 5, createdDate: 'yesterday', shinyNewField: { a: 1 } },
    { clientVersion: '2.1' },
  )
  t.equal(response.statusCode, 201)
  const record = response.json()
  const { id: workspaceId } = await prisma.workspace.findUniqueOrThrow({ where: { name: 'acme4' } })
  t.not(workspaceId, 999)
  t.equal(record.workspaceId, workspaceId, 'workspaceId comes from the token')
  t.not(record.uniq, 5, 'uniq is assigned by the server')
  t.notOk('shinyNewField' in record)
})

t.test('autofill is accepted in the envelope (false and true) without changing what is stored', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'acme5', defaultDomain: 'go5.acme.test' })
  const api = client(app, token)
  t.equal((await api.create({ url: 'https://example.com/1', title: 'Mine' }, { autofill: false })).statusCode, 201)
  const filled = await api.create({ url: 'https://example.com/2', title: 'Mine' }, { autofill: true })
  t.equal(filled.statusCode, 201)
  t.equal(filled.json().title, 'Mine', 'metadata the client set is kept')
  const bad = await api.create({ url: 'https://example.com/3' }, { autofill: 'yes' })
  t.equal(bad.statusCode, 400)
  t.same(bad.json().errors, [{ path: '/autofill', message: 'must be a boolean' }])
})

t.test('the default service domain is used by official tokens when the workspace has no domain', async (t) => {
  const token = await createWorkspaceToken(prisma, { workspace: 'partner6', official: true })
  const response = await client(app, token).create({ url: 'https://example.com/', id: 'abc' })
  t.equal(response.statusCode, 201)
  t.equal(response.json().domain, DEFAULT_DOMAIN)
  t.equal(response.json().shortUrl, `https://${DEFAULT_DOMAIN}/abc`)
})
