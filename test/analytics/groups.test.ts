/**
 * Workspace stats by one tag or one folder read the group aggregates (GroupHourly, GroupDaily: group-history.ts).
 * They must answer exactly what summing the matching links' own rows answers (the per-link path, which still
 * answers two tags or a tag and a folder): both are asked here on the same data, raw, split and rolled up, after
 * every change that moves a link between groups (tags, folder, delete, folder delete, updates judged from a stale
 * read, concurrent updates while the rollup runs) and after retention. The stored group rows are compared with the
 * links' own rows summed by the groups the links are in now.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import type { WorkspaceStatsRequest } from '../../schemas/stats.js'
import { dropExpired } from '../../src/analytics/partitions.js'
import { workspaceStats, type StatsContext } from '../../src/analytics/stats-service.js'
import { storeVisits, type StoredVisit } from '../../src/analytics/visit-store.js'
import { findLinkByUniq, updateLink } from '../../src/links/link-repository.js'
import { addDomain } from '../../src/workspaces/workspace-repository.js'
import { DEFAULT_DOMAIN, OFFICIAL_DOMAIN, testConfig } from '../support/test-app.js'
import { acmeAnalytics, BOT } from './stored-visit.js'

const { app, prisma, database, api, workspaceId, visit, setRolledUpTo } = await acmeAnalytics(t)
await addDomain(prisma, { workspace: 'acme', host: 'go2.acme.test', reservedDomains: [DEFAULT_DOMAIN, OFFICIAL_DOMAIN] })
const context: StatsContext = { prisma, config: testConfig() }
const caller = { tokenId: 0, workspaceId, official: false }
type Link = { uniq: number; domain: string }
type Json = Record<string, any>

const F = (await api.post('/v1/folders', { name: 'F' })).json().id as number
const G = (await api.post('/v1/folders', { name: 'G' })).json().id as number
const a: Link = await api.link({ url: 'https://example.com/a', id: 'a', tags: ['Promo', 'x'] })
const b: Link = await api.link({ url: 'https://example.com/b', id: 'b', folderId: F })
const c: Link = await api.link({ url: 'https://example.com/c', id: 'c', domain: 'go2.acme.test', tags: ['promo'], folderId: F })
const d: Link = await api.link({ url: 'https://example.com/d', id: 'd' })

const MAY = { from: '2030-05-01T00:00:00Z', to: '2030-05-06T00:00:00Z' }
const RANGES = [
  MAY,
  { from: '2030-05-01T05:00:00Z', to: '2030-05-04T20:00:00Z' },
  { from: '2030-05-02T00:00:00Z', to: '2030-05-02T23:00:00Z' },
  { from: '2030-05-01T00:00:00Z', to: '2030-06-05T00:00:00Z' },
]
const VIEWS = [
  { interval: 'day', timezone: 'UTC' },
  { interval: 'hour', timezone: 'Asia/Kolkata' },
  { interval: 'week', timezone: 'America/New_York' },
]
const FILTERS = [
  'tag=promo',
  'tag=PROMO&domain=go.acme.test',
  'tag=promo&domain=go2.acme.test',
  'tag=x',
  `folderId=${F}`,
  `folderId=${F}&domain=go2.acme.test`,
  `folderId=${G}`,
]

/** The query as the route hands it to the service, from its query string. */
function request(query: string): WorkspaceStatsRequest {
  const params = new URLSearchParams(query)
  const out: Record<string, unknown> = {}
  for (const key of ['from', 'to', 'interval', 'timezone', 'domain']) if (params.has(key)) out[key] = params.get(key)
  if (params.has('limit')) out.limit = Number(params.get('limit'))
  if (params.has('folderId')) out.folderId = Number(params.get('folderId'))
  if (params.has('tag')) out.tag = params.getAll('tag')
  return out as WorkspaceStatsRequest
}

/** What the API answers (the group path for one tag or one folder) and what summing the links' rows answers. */
async function bothPaths(query: string): Promise<[unknown, unknown]> {
  const response = await api.get(`/v1/stats?${query}`)
  const perLink = await workspaceStats(context, caller, request(query), { groups: false })
  return [response.statusCode === 200 ? response.json() : response.statusCode, JSON.parse(JSON.stringify(perLink))]
}

/** The group rows of a tier as stored, and the links' own rows summed by the groups the links are in now. */
async function groupRows(tier: 'Hourly' | 'Daily') {
  const time = tier === 'Hourly' ? '"hour"' : '"day"'
  const columns = `"workspaceId", "groupKind", "groupValue", "dimension", ${time}::text AS "time", "domain", "value"`
  const stored = await prisma.$queryRawUnsafe<unknown[]>(
    `SELECT ${columns}, "clicks", "visitors", "bots" FROM "analytics"."Group${tier}" ORDER BY 1, 2, 3, 4, 5, 6, 7`,
  )
  const expected = await prisma.$queryRawUnsafe<unknown[]>(
    `WITH "groups" AS (
       SELECT l."uniq", l."workspaceId", l."domain", 'tag' AS "groupKind", k AS "groupValue" FROM "Link" l, unnest(l."tagKeys") AS k
       UNION
       SELECT l."uniq", l."workspaceId", l."domain", 'folder', l."folderId"::text FROM "Link" l WHERE l."folderId" IS NOT NULL),
     "rows" AS (
       SELECT "linkUniq", "dimension", ${time}, "value", "clicks", "visitors", "bots" FROM "analytics"."Link${tier}"
       UNION ALL
       SELECT "linkUniq", 'link', ${time}, "linkUniq"::text, "clicks", "visitors", "bots" FROM "analytics"."Link${tier}" WHERE "dimension" = 'total')
     SELECT g."workspaceId", g."groupKind", g."groupValue", r."dimension", r.${time}::text AS "time", g."domain", r."value",
            sum(r."clicks")::int AS "clicks", sum(r."visitors")::int AS "visitors", sum(r."bots")::int AS "bots"
     FROM "groups" g JOIN "rows" r ON r."linkUniq" = g."uniq"
     GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7`,
  )
  return { stored, expected }
}

/** Every range, view and filter through both paths, and both tiers of group rows against the links' rows. */
async function compare(t: Test, label: string, filters = FILTERS, ranges = RANGES) {
  const viaGroups: Record<string, unknown> = {}
  const perLink: Record<string, unknown> = {}
  for (const range of ranges) {
    for (const view of VIEWS) {
      if (view.interval === 'hour' && Date.parse(range.to) - Date.parse(range.from) > 10 * 86_400_000) continue
      for (const filter of filters) {
        const query = `${new URLSearchParams({ ...range, ...view, limit: '100' })}&${filter}`
        ;[viaGroups[query], perLink[query]] = await bothPaths(query)
      }
    }
  }
  t.same(viaGroups, perLink, `${label}: the group path answers what the per-link path answers`)
  for (const tier of ['Hourly', 'Daily'] as const) {
    const { stored, expected } = await groupRows(tier)
    t.same(stored, expected, `${label}: Group${tier} holds the links' rows by the groups they are in now`)
  }
}

/** The link's update (PUT), without autofill. */
const update = (link: Link, changes: Json) => api.put(`/v1/links/${link.uniq}`, { link: changes, autofill: false })
const totals = async (query: string) => (await api.get(`/v1/stats?${query}`)).json().totals
const linkTotals = async (link: Link, query: string) => (await api.get(`/v1/links/${link.uniq}/stats?${query}`)).json().totals
const range = (r: { from: string; to: string }) => new URLSearchParams(r).toString()
const add = (x: Json, y: Json, sign = 1) => ({ clicks: x.clicks + sign * y.clicks, visitors: x.visitors + sign * y.visitors, bots: x.bots + sign * y.bots })

t.test('one tag, one folder, with and without a domain: the same answers raw, split and rolled up', async (t) => {
  await setRolledUpTo('2030-01-01T00:00:00Z')
  await storeVisits(database, [
    visit(a, '2030-05-01T09:00:00Z', 1),
    visit(c, '2030-05-01T09:30:00Z', 1, { country: 'DE' }),
    visit(a, '2030-05-01T23:59:00Z', 2, { device: 'mobile', os: 'iOS', browser: 'Safari' }),
    visit(b, '2030-05-02T00:10:00Z', 3, { referrerHost: null }),
    visit(c, '2030-05-02T05:00:00Z', 4, BOT),
    visit(d, '2030-05-02T06:00:00Z', 5),
    visit(a, '2030-05-02T18:45:00Z', 1, { destination: 'https://example.com/b' }),
    visit(b, '2030-05-03T12:00:00Z', 6, { country: null }),
    visit(c, '2030-05-03T12:30:00Z', 6),
    visit(d, '2030-05-04T01:00:00Z', 7),
    visit(a, '2030-05-04T22:00:00Z', 8, BOT),
    visit(b, '2030-05-05T03:00:00Z', 3),
  ])
  await compare(t, 'raw')
  // Visitor 1 came to a and c (both promo) on the 1st: twice among the tag's visitors, as the links count them.
  t.same(await totals(`${range(MAY)}&tag=promo`), { clicks: 5, visitors: 5, bots: 2 })
  t.same(await totals(`${range(MAY)}&folderId=${F}`), { clicks: 5, visitors: 5, bots: 1 })
  t.same(await totals(`${range(MAY)}&tag=promo&domain=go2.acme.test`), { clicks: 2, visitors: 2, bots: 1 })

  await app.visitRollup.run(new Date('2030-05-02T12:00:00Z'))
  await compare(t, 'split at noon on the 2nd')
  await app.visitRollup.run(new Date('2030-06-01T00:00:00Z'))
  await compare(t, 'rolled up')
  const [{ rows }] = await prisma.$queryRawUnsafe<{ rows: number }[]>(`SELECT count(*)::int AS "rows" FROM "analytics"."GroupDaily"`)
  t.ok(rows > 0, 'the groups have rows')

  // The API reads the group rows: a change to them shows there and not in the per-link sums.
  const query = `${range(MAY)}&tag=promo`
  const bump = (by: number) =>
    prisma.$executeRawUnsafe(`UPDATE "analytics"."GroupDaily" SET "clicks" = "clicks" + $1 WHERE "groupValue" = 'promo' AND "dimension" = 'total'`, by)
  await bump(100)
  const [viaGroups, perLink] = (await bothPaths(query)) as [Json, Json]
  t.not(viaGroups.totals.clicks, perLink.totals.clicks, 'the group path reads GroupDaily')
  await bump(-100)
  t.same(await bothPaths(query).then(([x]) => x), perLink)
})

t.test("a link's history moves with its tags and folder, and leaves with the link", async (t) => {
  const MAY_JUNE = range(RANGES[3])
  // After each move, every filter over May (summed, whole days) and May to June (June's visits raw until the
  // rollup below): the cuts of ranges into days and hours are the first test's, and the stored group rows are
  // compared whole, both tiers, whatever the ranges (a quarter of the first test's queries, nine times over).
  const MOVE_RANGES = [MAY, RANGES[3]]
  // Not rolled up yet (rolledUpTo is 2030-06-01): read from the raw visits by the links' groups now.
  await storeVisits(database, [visit(a, '2030-06-02T10:00:00Z', 11), visit(b, '2030-06-02T11:00:00Z', 12), visit(d, '2030-06-03T09:00:00Z', 13)])

  let promo = await totals(`${MAY_JUNE}&tag=promo`)
  t.equal((await update(d, { tags: ['promo'] })).statusCode, 200)
  t.same(await totals(`${MAY_JUNE}&tag=promo`), (promo = add(promo, await linkTotals(d, MAY_JUNE))), 'd brought its history to promo')
  await compare(t, 'tag added', FILTERS, MOVE_RANGES)

  t.equal((await update(a, { tags: ['x'] })).statusCode, 200)
  t.same(await totals(`${MAY_JUNE}&tag=promo`), (promo = add(promo, await linkTotals(a, MAY_JUNE), -1)), 'a took its history out of promo')
  await compare(t, 'tag removed', FILTERS, MOVE_RANGES)

  t.equal((await update(c, { tags: ['PROMO'] })).statusCode, 200)
  t.same(await totals(`${MAY_JUNE}&tag=promo`), promo, 'the same tag in other letters: nothing moves')
  await compare(t, 'tag in other letters', FILTERS, MOVE_RANGES)

  t.equal((await update(b, { folderId: G })).statusCode, 200)
  t.same(await totals(`${MAY_JUNE}&folderId=${G}`), await linkTotals(b, MAY_JUNE), 'b brought its history to G')
  await compare(t, 'folder changed', FILTERS, MOVE_RANGES)

  // With pixels the update takes the transaction of Prisma's client (link-repository.ts): the same move.
  const withPixels = await update(c, { pixels: [{ platform: 'facebook', value: '42' }], folderId: G, tags: ['promo', 'x'] })
  t.equal(withPixels.statusCode, 200)
  await compare(t, 'folder and tags changed with pixels', FILTERS, MOVE_RANGES)

  await app.visitRollup.run(new Date('2030-07-01T00:00:00Z'))
  await compare(t, "June's visits rolled up into the groups the links are in now", FILTERS, MOVE_RANGES)

  t.equal((await api.delete(`/v1/links/${a.uniq}`)).statusCode, 204)
  t.same(await totals(`${MAY_JUNE}&tag=x`), await linkTotals(c, MAY_JUNE), 'tag x holds c only')
  await compare(t, 'link deleted', FILTERS, MOVE_RANGES)

  t.equal((await api.delete(`/v1/folders/${G}?moveLinksTo=${F}`)).statusCode, 204)
  await compare(t, 'folder deleted, its links moved to another', FILTERS, MOVE_RANGES)
  t.same(await totals(`${MAY_JUNE}&folderId=${G}`), { clicks: 0, visitors: 0, bots: 0 })

  t.equal((await api.delete(`/v1/folders/${F}?force=true`)).statusCode, 204)
  await compare(t, 'folder deleted, its links in no folder', FILTERS, MOVE_RANGES)
  const [{ rows }] = await prisma.$queryRawUnsafe<{ rows: number }[]>(
    `SELECT (SELECT count(*) FROM "analytics"."GroupHourly" WHERE "groupKind" = 'folder')
          + (SELECT count(*) FROM "analytics"."GroupDaily" WHERE "groupKind" = 'folder') AS "rows"`,
  )
  t.equal(Number(rows), 0, 'no folder rows are left, not even zeros')
})

t.test('an update judged from a stale read moves the history from the groups the link is in when it is written', async (t) => {
  const stale = (await findLinkByUniq(database, workspaceId, d.uniq))!
  t.same(stale.tagKeys, ['promo'])
  t.equal((await update(d, { tags: ['y'] })).statusCode, 200)
  // Written as if d still had promo: its history must leave y, not promo a second time.
  await updateLink(database, stale, { tags: ['z'] })
  await compare(t, 'stale update', ['tag=promo', 'tag=y', 'tag=z'], [MAY])
  t.same(await totals(`${range(MAY)}&tag=z`), await linkTotals(d, range(MAY)))
})

t.test('concurrent tag and folder updates while visits come and the rollup runs: nothing lost or counted twice', async (t) => {
  const folder = (await api.post('/v1/folders', { name: 'H' })).json().id as number
  const links: Link[] = []
  for (let i = 0; i < 6; i++) links.push(await api.link({ url: `https://example.com/k${i}`, id: `k${i}`, tags: ['hot'] }))
  const start = Date.parse('2031-01-01T00:00:00Z')
  const at = (hours: number) => new Date(start + hours * 3_600_000).toISOString()
  let visitor = 100
  const someVisits = (fromHour: number): StoredVisit[] =>
    links.flatMap((link, i) => [visit(link, at(fromHour + i / 10), visitor++), visit(link, at(fromHour + 1 + i / 10), visitor++, i % 3 ? {} : BOT)])
  await storeVisits(database, someVisits(0))

  const stale = await Promise.all(links.map((link) => findLinkByUniq(database, workspaceId, link.uniq)))
  const updates = async () => {
    for (let round = 0; round < 6; round++) {
      await Promise.all(
        links.map(async (link, i) => {
          const tags = (round + i) % 2 ? ['cold'] : ['hot']
          // Half through the API, half from the read made before any of them (stale).
          if (i % 2) t.equal((await update(link, { tags, folderId: round % 3 ? folder : null })).statusCode, 200)
          else await updateLink(database, stale[i]!, { tags })
        }),
      )
    }
  }
  const rollups = async () => {
    for (let hour = 2; hour <= 24; hour += 2) await app.visitRollup.run(new Date(at(hour)))
  }
  const recording = async () => {
    // Some land before "rolledUpTo" by the time they are stored (late visits, summed by their batch).
    for (let hour = 1; hour <= 21; hour += 4) await storeVisits(database, someVisits(hour))
  }
  await Promise.all([updates(), rollups(), recording()])
  const JAN = { from: '2031-01-01T00:00:00Z', to: '2031-01-03T00:00:00Z' }
  await compare(t, 'after the race, before the last rollup', ['tag=hot', 'tag=cold', `folderId=${folder}`], [JAN])
  await app.visitRollup.run(new Date('2031-02-01T00:00:00Z'))
  await compare(t, 'after the race, all rolled up', ['tag=hot', 'tag=cold', `folderId=${folder}`], [JAN])

  // Every k link has exactly one of hot and cold: together they hold every visit of the k links.
  const hot = await totals(`${range(JAN)}&tag=hot`)
  const cold = await totals(`${range(JAN)}&tag=cold`)
  let all = { clicks: 0, visitors: 0, bots: 0 }
  for (const link of links) all = add(all, await linkTotals(link, range(JAN)))
  t.same(add(hot, cold), all, 'hot and cold hold every visit once')
  t.equal(all.clicks + all.bots, links.length * 2 * 7, 'and every visit stored')
})

t.test('deletes of links in no group take no lock; one that gains a tag meanwhile still takes its history along', async (t) => {
  const plain: Link = await api.link({ url: 'https://example.com/plain', id: 'plain-delete' })
  const tagged: Link = await api.link({ url: 'https://example.com/gains', id: 'gains-a-tag' })
  await storeVisits(database, [visit(plain, '2030-05-02T08:00:00Z', 31), visit(tagged, '2030-05-02T09:00:00Z', 32)])
  await app.visitRollup.run(new Date('2030-07-01T00:00:00Z'))

  // While another transaction holds the rollup's row, a link in no group is deleted all the same. (The embedded
  // database has one connection: nothing runs beside a transaction there, so this needs PostgreSQL.)
  if (process.env.DATABASE_URL) await database.transaction(async (query) => {
    await query(`SELECT true FROM "analytics"."Rollup" FOR UPDATE`)
    // A delete that waited for the row would wait for this transaction, which waits for it: given up after 5 s.
    const answer = await Promise.race([api.delete(`/v1/links/${plain.uniq}`), sleep(5000).then(() => 'still waiting after 5 s')])
    t.equal(typeof answer === 'string' ? answer : answer.statusCode, 204, 'deleted while the rollup is held')
  })
  else t.equal((await api.delete(`/v1/links/${plain.uniq}`)).statusCode, 204)
  t.equal(await prisma.link.count({ where: { uniq: plain.uniq } }), 0)
  await compare(t, 'a link in no group deleted', ['tag=late', 'tag=promo'], [MAY])

  // The delete and an update that gives the link a tag, at once: either order leaves the groups right.
  const [updated, deleted] = await Promise.all([update(tagged, { tags: ['late'] }), api.delete(`/v1/links/${tagged.uniq}`)])
  t.equal(deleted.statusCode, 204)
  t.ok([200, 404].includes(updated.statusCode), `the update: ${updated.statusCode}`)
  await compare(t, 'a link that gained a tag while being deleted', ['tag=late', 'tag=promo'], [MAY])
  t.same(await totals(`${range(MAY)}&tag=late`), { clicks: 0, visitors: 0, bots: 0 }, 'nothing left in its tag')
})

t.test('retention trims the group tables at the same midnight as the others', async (t) => {
  const cutoff = Date.parse('2030-05-03T15:00:00Z')
  await dropExpired(prisma, new Date(cutoff + 30 * 86_400_000), 30)
  const [{ before, kept }] = await prisma.$queryRawUnsafe<{ before: number; kept: number }[]>(
    `SELECT (SELECT count(*) FROM "analytics"."GroupHourly" WHERE "hour" < '2030-05-03T00:00:00Z')
          + (SELECT count(*) FROM "analytics"."GroupDaily" WHERE "day" < '2030-05-03T00:00:00Z') AS "before",
            (SELECT count(*) FROM "analytics"."GroupDaily" WHERE "day" = '2030-05-03T00:00:00Z') AS "kept"`,
  )
  t.equal(Number(before), 0, 'nothing before the midnight is left')
  t.ok(Number(kept) > 0, 'the day of the cutoff stays')
  await compare(t, 'after retention', ['tag=promo', 'tag=x', 'tag=z'], [MAY])
})
