/** Contract section 7: both update paths merge, null clears, identity cannot change, unknown links are 404. */
import t from 'tap'
import { Prisma } from '../../src/generated/prisma/client.js'
import { hashPassword, verifyPassword } from '../../src/links/password.js'
import { holdRowLock, waitForLockWaiters } from '../support/row-lock.js'
import { linkStatements } from '../support/link-statements.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { buildTestApp, client, createWorkspaceToken } from '../support/test-app.js'

const { app, prisma, database } = await buildTestApp(t)
const token = await createWorkspaceToken(prisma, { workspace: 'upd', defaultDomain: 'go.upd.test' })
const api = client(app, token)

let counter = 0
async function newLink(extra: Record<string, unknown> = {}) {
  const response = await api.create({
    url: 'https://example.com/original',
    id: `link-${++counter}`,
    title: 'Original title',
    description: 'Original description',
    tags: ['one', 'two'],
    note: 'a note',
    pixels: [{ platform: 'ga', value: 'UA-1' }],
    extraOptionsGeolocations: [{ url: 'https://example.de/', value: 'DE' }],
    linkExpiration: { enable: true, end: '2030-01-01T00:00:00.000Z', url: 'https://example.com/expired', timezone: 0 },
    passwordProtect: { enable: true, password: 'first secret' },
    ...extra,
  })
  if (response.statusCode !== 201) throw new Error(response.body)
  return response.json()
}

t.test('PUT /v1/links/{uniqId} replaces only the fields present', async (t) => {
  const link = await newLink()
  const response = await api.update(link.uniq, { title: 'New title', tags: 'three, four' })
  t.equal(response.statusCode, 200)
  const updated = response.json()
  t.equal(updated.title, 'New title')
  t.same(updated.tags, ['three', 'four'], 'arrays are replaced as a whole')
  t.equal(updated.description, 'Original description', 'absent fields are kept')
  t.equal(updated.url, 'https://example.com/original')
  t.same(updated.pixels.map((p: { value: string }) => p.value), ['UA-1'])
  t.same(updated.extraOptionsGeolocations, link.extraOptionsGeolocations)
  t.same(updated.linkExpiration, link.linkExpiration)
  t.equal(updated.createdDate, link.createdDate)
  t.ok(updated.updatedDate >= link.updatedDate)
  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
  t.equal(stored.title, 'New title')
  t.equal(stored.description, 'Original description')
})

t.test('PUT /v1/links/by-domain/{domain}/{id} merges the same way, matching the slug in any case', async (t) => {
  const link = await newLink()
  const response = await api.updateByDomain('GO.upd.test', link.id.toUpperCase(), { url: 'https://example.com/changed' })
  t.equal(response.statusCode, 200)
  t.equal(response.json().uniq, link.uniq)
  t.equal(response.json().url, 'https://example.com/changed')
  t.equal(response.json().id, link.id, 'the slug keeps its spelling')
  t.equal(response.json().title, 'Original title')
})

t.test('null clears nullable fields', async (t) => {
  const link = await newLink()
  const response = await api.update(link.uniq, {
    title: null,
    description: null,
    note: null,
    image: null,
    favicon: null,
    folderId: null,
    linkScripts: null,
    linkExpiration: null,
    passwordProtect: null,
  })
  t.equal(response.statusCode, 200)
  t.match(response.json(), {
    title: null,
    description: null,
    note: null,
    image: null,
    favicon: null,
    folderId: null,
    linkScripts: null,
    linkExpiration: null,
    passwordProtect: null,
  })
  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
  t.equal(stored.passwordHash, null, 'clearing password protection drops the hash')
  t.equal(stored.expiresAt, null)
})

t.test('null is refused for fields that are not nullable, and nothing changes', async (t) => {
  const link = await newLink()
  for (const field of ['url', 'tags', 'pixels', 'showGDPR', 'masking', 'extraOptionsGeolocations', 'extraOptionsLinkRotator']) {
    const response = await api.update(link.uniq, { [field]: null, title: 'should not be stored' })
    t.equal(response.statusCode, 400, field)
    t.equal(response.json().errors[0].path, `/link/${field}`)
  }
  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
  t.equal(stored.title, 'Original title')
})

t.test('an empty link object is valid and returns the link unchanged', async (t) => {
  const link = await newLink()
  const response = await api.update(link.uniq, {})
  t.equal(response.statusCode, 200)
  t.same(response.json(), link)
})

t.test('an update that only repeats what is stored changes nothing: the same updatedDate', async (t) => {
  const link = await newLink()
  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
  // What a client sends when it writes back the record it read (the pixels by platform and value, as given).
  const repeated = {
    url: link.url, title: link.title, description: link.description, tags: link.tags, note: link.note,
    pixels: [{ platform: 'ga', value: 'UA-1' }], extraOptionsGeolocations: link.extraOptionsGeolocations,
    extraOptionsLinkRotator: link.extraOptionsLinkRotator, folderId: null, showGDPR: false, masking: false,
    linkExpiration: link.linkExpiration, passwordProtect: { enable: true }, domain: link.domain, id: link.id,
  }
  const response = await api.update(link.uniq, repeated)
  t.equal(response.statusCode, 200)
  // Image and favicon are empty after the merge, so autofill runs (contract section 12); example.com cannot be
  // reached from the tests, so it fills nothing.
  t.equal(response.headers['x-autofill'], 'failed', 'autofill ran for the empty image and favicon')
  t.same(response.json(), link, 'the link as it was, updatedDate included')
  const after = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
  t.equal(after.updatedAt.getTime(), stored.updatedAt.getTime(), 'nothing was written')

  // Each of these differs from what is stored, so each is a change.
  for (const change of [
    { title: 'Another title' },
    { tags: ['two', 'one'] },
    { pixels: [{ platform: 'ga', value: 'UA-1', title: 'Named' }] },
    { passwordProtect: { enable: true, password: 'first secret' } },
    { linkExpiration: { ...link.linkExpiration, url: 'https://example.com/expired-elsewhere' } },
  ]) {
    const changed = await api.update(link.uniq, change)
    t.equal(changed.statusCode, 200)
    t.not(changed.headers['x-autofill'], 'skipped', `${Object.keys(change)[0]}: autofill ran`)
    t.ok(changed.json().updatedDate > link.updatedDate, `${Object.keys(change)[0]}: a new updatedDate`)
  }
})

t.test('linkExpiration.url may be null or absent: stored as none, and repeating that changes nothing', async (t) => {
  const link = await newLink()
  const { url: _url, ...withoutUrl } = link.linkExpiration
  const cleared = await api.update(link.uniq, { linkExpiration: withoutUrl })
  t.equal(cleared.statusCode, 200)
  t.same(cleared.json().linkExpiration, { ...withoutUrl, url: null })
  t.equal((await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).expirationUrl, null)
  const repeated = await api.update(link.uniq, { linkExpiration: { ...withoutUrl, url: null } })
  t.equal(repeated.statusCode, 200)
  t.equal(repeated.headers['x-autofill'], 'failed', 'autofill ran (image and favicon are empty) and filled nothing')
  t.equal(repeated.json().updatedDate, cleared.json().updatedDate)
  const restored = await api.update(link.uniq, { linkExpiration: link.linkExpiration })
  t.same(restored.json().linkExpiration, link.linkExpiration)
})

t.test("repeating the link's own domain and id is accepted; a different one is 400", async (t) => {
  const link = await newLink()
  const same = await api.update(link.uniq, { domain: 'GO.UPD.TEST', id: link.id, note: 'repeated identity' })
  t.equal(same.statusCode, 200)
  t.equal(same.json().note, 'repeated identity')

  const otherDomain = await api.update(link.uniq, { domain: 'elsewhere.test', note: 'x' })
  t.equal(otherDomain.statusCode, 400)
  t.same(otherDomain.json().errors.map((e: { path: string }) => e.path), ['/link/domain'])
  const otherId = await api.update(link.uniq, { id: 'renamed', note: 'x' })
  t.equal(otherId.statusCode, 400)
  t.same(otherId.json().errors.map((e: { path: string }) => e.path), ['/link/id'])
  t.equal((await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).note, 'repeated identity')
})

t.test('unknown links are 404 on both paths', async (t) => {
  for (const response of [
    await api.update(987654, { title: 'x' }),
    await api.updateByDomain('go.upd.test', 'no-such-slug', { title: 'x' }),
    await api.updateByDomain('not a host', 'x', { title: 'x' }),
  ]) {
    t.equal(response.statusCode, 404)
    t.match(response.headers['content-type'], /^application\/problem\+json/)
    t.match(response.json(), { code: 'not_found', status: 404, title: 'Not Found' })
  }
  for (const bad of ['abc', '99999999999999']) {
    const badId = await api.update(bad, { title: 'x' })
    t.equal(badId.statusCode, 400, bad)
    t.equal(badId.json().errors[0].path, '/uniqId', bad)
  }
})

t.test('password: {enable: true} alone keeps the stored hash; a new password replaces it', async (t) => {
  const link = await newLink()
  const original = (await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).passwordHash

  const disabled = await api.update(link.uniq, { passwordProtect: { enable: false } })
  t.same(disabled.json().passwordProtect, { enable: false })
  const enabled = await api.update(link.uniq, { passwordProtect: { enable: true } })
  t.equal(enabled.statusCode, 200)
  t.same(enabled.json().passwordProtect, { enable: true })
  t.equal((await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).passwordHash, original)

  const changed = await api.update(link.uniq, { passwordProtect: { enable: true, password: 'second secret' } })
  t.equal(changed.statusCode, 200)
  t.notOk(changed.body.includes('second secret'))
  const hash = (await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).passwordHash
  t.not(hash, original)
  t.match(hash, /^scrypt\$/)
})

t.test(
  'password: {enable: true} alone keeps the hash stored when it is written, not the one read before (a password set meanwhile stays)',
  { skip: process.env.DATABASE_URL ? false : 'a race of two transactions: PostgreSQL only' },
  async (t) => {
    const link = await newLink()
    const newHash = await hashPassword('set meanwhile')
    // Another request's write holds the row: this update reads the link, then waits for the row to write it.
    const other = await holdRowLock(prisma, Prisma.sql`SELECT 1 FROM "Link" WHERE "uniq" = ${link.uniq} FOR UPDATE`)
    const enabling = api.update(link.uniq, { note: 'written back', passwordProtect: { enable: true } }, { autofill: false })
    await waitForLockWaiters(prisma, 1)
    await other.release((tx) => tx.$executeRaw`UPDATE "Link" SET "passwordHash" = ${newHash} WHERE "uniq" = ${link.uniq}`)
    const answer = await enabling
    t.equal(answer.statusCode, 200)
    const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
    t.equal(stored.passwordHash, newHash, 'the password set meanwhile is kept')
    t.equal(stored.note, 'written back')
    t.ok(await verifyPassword('set meanwhile', stored.passwordHash!))

    // And one removed meanwhile stays removed: the link is not left "enabled" with no password.
    const second = await newLink()
    const remover = await holdRowLock(prisma, Prisma.sql`SELECT 1 FROM "Link" WHERE "uniq" = ${second.uniq} FOR UPDATE`)
    const enablingAgain = api.update(second.uniq, { note: 'written back', passwordProtect: { enable: true } }, { autofill: false })
    await waitForLockWaiters(prisma, 1)
    await remover.release((tx) => tx.$executeRaw`UPDATE "Link" SET "passwordHash" = NULL, "passwordEnable" = NULL WHERE "uniq" = ${second.uniq}`)
    t.equal((await enablingAgain).statusCode, 200)
    const removed = await prisma.link.findUniqueOrThrow({ where: { uniq: second.uniq } })
    t.same([removed.passwordEnable, removed.passwordHash], [null, null])
  },
)

t.test(
  "an update's answer shows the pixels stored when it was written, not those of the snapshot it began with",
  { skip: process.env.DATABASE_URL ? false : 'a race of two transactions: PostgreSQL only' },
  async (t) => {
    for (const [path, extra] of [['one statement', { autofill: false }], ['full path', {}]] as const) {
      const link = await newLink()
      const { workspaceId } = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })
      const pixel = await prisma.pixel.create({ data: { workspaceId, platform: 'quora', value: `Q-${path}` } })
      // Another request changing the link's pixels holds its row; this update of the url waits for it.
      const other = await holdRowLock(prisma, Prisma.sql`SELECT 1 FROM "Link" WHERE "uniq" = ${link.uniq} FOR NO KEY UPDATE`)
      const updating = api.update(link.uniq, { url: `https://example.com/${path.replace(' ', '-')}` }, extra)
      await waitForLockWaiters(prisma, 1)
      await other.release(async (tx) => {
        await tx.$executeRaw`DELETE FROM "LinkPixel" WHERE "linkUniq" = ${link.uniq}`
        await tx.$executeRaw`INSERT INTO "LinkPixel" ("linkUniq", "pixelId", "position") VALUES (${link.uniq}, ${pixel.id}::uuid, 0)`
        await tx.$executeRaw`UPDATE "Link" SET "updatedAt" = now() WHERE "uniq" = ${link.uniq}`
      })
      const answer = await updating
      t.equal(answer.statusCode, 200, path)
      t.same(answer.json().pixels.map((p: { value: string }) => p.value), [`Q-${path}`], `${path}: the pixels as stored now`)
      t.same(answer.json(), (await app.inject({ url: `/v1/links/${link.uniq}`, headers: { 'api-authorization': token } })).json(), `${path}: the answer is the stored link`)
    }
  },
)

t.test('password: {enable: false} on a link that never had one is stored as sent, and repeating it changes nothing', async (t) => {
  const link = await newLink({ passwordProtect: null })
  const first = await api.update(link.uniq, { passwordProtect: { enable: false } }, { autofill: false })
  t.same(first.json().passwordProtect, { enable: false }, 'as a create with {enable: false} stores it')
  const again = await api.update(link.uniq, { passwordProtect: { enable: false } }, { autofill: false })
  t.same(again.json().passwordProtect, { enable: false })
  t.equal(again.json().updatedDate, first.json().updatedDate, 'the repeat changes nothing')
})

t.test('password: enabling a link that never had one without giving one is 400', async (t) => {
  const link = await newLink({ passwordProtect: null })
  const response = await api.update(link.uniq, { passwordProtect: { enable: true } })
  t.equal(response.statusCode, 400)
  t.same(response.json().errors, [{ path: '/link/passwordProtect/password', message: 'is required to enable password protection' }])
  t.equal((await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })).passwordEnable, null)
})

t.test('pixels given on update replace the list, in the order given', async (t) => {
  const link = await newLink()
  const response = await api.update(link.uniq, {
    pixels: [{ platform: 'twitter', value: 'tw-1' }, link.pixels[0].id, { platform: 'quora', value: 'q-1' }],
  })
  t.equal(response.statusCode, 200)
  t.same(response.json().pixels.map((p: { value: string }) => p.value), ['tw-1', 'UA-1', 'q-1'])
  const cleared = await api.update(link.uniq, { pixels: [] })
  t.same(cleared.json().pixels, [])
  t.equal(await prisma.linkPixel.count({ where: { linkUniq: link.uniq } }), 0)
})

t.test('an update that fails validation changes nothing', async (t) => {
  const link = await newLink()
  const before = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq }, include: { pixels: true } })
  const response = await api.update(link.uniq, {
    title: 'changed',
    pixels: [{ platform: 'pinterest', value: 'p-1' }],
    extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: 70 }, { url: 'https://example.com/b', value: 70 }],
  })
  t.equal(response.statusCode, 400)
  const after = await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq }, include: { pixels: true } })
  t.same(after, before)
  t.equal(await prisma.pixel.count({ where: { value: 'p-1' } }), 0, 'no pixel was created either')
})

t.test('the update redirect-loop check covers the new destination', async (t) => {
  const link = await newLink()
  const response = await api.update(link.uniq, { url: 'https://go.upd.test/other' })
  t.equal(response.statusCode, 400)
  t.equal(response.json().code, 'redirect_loop')
})

t.test('autofill off, by uniq: the fields of the row in one UPDATE, with the answers of the full path', async (t) => {
  const link = await newLink({ extraOptionsLinkRotator: [{ url: 'https://example.com/b', value: 30 }] })
  // What the update sends: the database's statements that name the links' table, and its transactions.
  const sent = linkStatements(t, database)
  const off = { autofill: false }

  const changes = {
    url: 'https://example.com/moved', title: 'One statement', description: null, note: 'n', image: '', showGDPR: true, masking: true,
    extraOptionsGeolocations: [{ url: 'https://example.fr/', value: 'fr' }], extraOptionsLinkRotator: [],
    linkExpiration: { ...link.linkExpiration, url: null }, domain: 'Go.Upd.Test', id: link.id.toUpperCase(),
  }
  const response = await api.update(link.uniq, changes, off)
  t.equal(response.statusCode, 200)
  t.same(sent.splice(0), ['UPDATE "Link" AS'], 'the UPDATE alone')
  const updated = response.json()
  t.same(updated, {
    ...link,
    url: 'https://example.com/moved', title: 'One statement', description: null, note: 'n', image: null, showGDPR: true, masking: true,
    extraOptionsGeolocations: [{ url: 'https://example.fr/', value: 'FR' }], extraOptionsLinkRotator: [],
    linkExpiration: { ...link.linkExpiration, url: null }, updatedDate: updated.updatedDate,
  })
  t.ok(updated.updatedDate > link.updatedDate, 'a new updatedDate')
  const read = () => app.inject({ url: `/v1/links/${link.uniq}`, headers: { 'api-authorization': token } })
  t.same((await read()).json(), updated, 'stored as answered')

  await new Promise((resolve) => setTimeout(resolve, 5))
  const repeated = await api.update(link.uniq, { title: 'One statement', masking: true, extraOptionsLinkRotator: [] }, off)
  t.same(repeated.json(), updated, 'repeating the stored values: the same record, updatedDate included')
  sent.length = 0

  // Whatever the UPDATE cannot decide alone goes the full way, with its answers.
  const unknown = await api.update(987655, { title: 'x' }, off)
  t.equal(unknown.statusCode, 404)
  const otherId = await api.update(link.uniq, { id: 'renamed', title: 'x' }, off)
  t.same([otherId.statusCode, otherId.json().errors[0].path], [400, '/link/id'])
  const otherDomain = await api.update(link.uniq, { domain: 'elsewhere.test', title: 'x' }, off)
  t.same([otherDomain.statusCode, otherDomain.json().errors[0].path], [400, '/link/domain'])
  const heavy = { extraOptionsLinkRotator: [{ url: 'https://example.com/a', value: 60 }, { url: 'https://example.com/b', value: 60 }] }
  t.equal((await api.update(987655, heavy, off)).statusCode, 404, 'an unknown link is a 404 before its fields are a 400')
  t.equal((await api.update(link.uniq, heavy, off)).statusCode, 400)
  const otherToken = await createWorkspaceToken(prisma, { workspace: 'upd-other', defaultDomain: 'go.upd-other.test' })
  t.equal((await client(app, otherToken).update(link.uniq, { title: 'stolen' }, off)).statusCode, 404, "another workspace's link")
  t.same((await read()).json(), updated, 'none of these changed it')

  // Fields of other rows, or that need the stored link, take the full path.
  sent.length = 0
  t.equal((await api.update(link.uniq, { tags: ['t'] }, off)).statusCode, 200)
  t.not(sent[0], 'UPDATE "Link" AS', 'tags: read first')

  // Over the quota, a missing link is still a 404 and another domain or id a 400, as on the full path.
  const fullToken = await createWorkspaceToken(prisma, { workspace: 'upd-full', defaultDomain: 'go.upd-full.test' })
  await setLimits(prisma, { workspace: 'upd-full', hour: 1 })
  const full = client(app, fullToken)
  const own = json201(await full.create({ url: 'https://example.com/full', id: 'full' }, off))
  t.equal((await full.update(own.uniq, { title: 'the one update' }, off)).statusCode, 200)
  t.equal((await full.update(own.uniq, { title: 'one too many' }, off)).statusCode, 429)
  t.equal((await full.update(987656, { title: 'x' }, off)).statusCode, 404, 'unknown link: 404, not 429')
  t.equal((await full.update(own.uniq, { id: 'other', title: 'x' }, off)).statusCode, 400, 'another id: 400, not 429')
  t.equal((await full.update(own.uniq, { domain: 'elsewhere.test', title: 'x' }, off)).statusCode, 400, 'another domain: 400, not 429')
})

function json201(response: { statusCode: number; body: string; json(): any }) {
  if (response.statusCode !== 201) throw new Error(`${response.statusCode} ${response.body}`)
  return response.json()
}
