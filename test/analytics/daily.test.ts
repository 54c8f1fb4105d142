/**
 * The daily tier of the aggregates (LinkDaily, WorkspaceDaily): stats read a range's whole UTC days from it and
 * its partial days from the hourly tier. The answers must not depend on that: all raw, split at "rolledUpTo" in
 * the middle of a day, or all summed give the same numbers, for ranges with edges inside days, in a zone with a
 * half-hour offset and across a DST change, by hour, day, week and month, with every workspace filter. Both
 * tiers hold the same visits, the late ones included.
 */
import t from 'tap'
import { dropExpired } from '../../src/analytics/partitions.js'
import { storeVisits, type StoredVisit } from '../../src/analytics/visit-store.js'
import { apiClient } from '../support/api-client.js'
import { createWorkspaceToken } from '../support/test-app.js'
import { acmeAnalytics, BOT } from './stored-visit.js'

const { app, prisma, database, api, visit, setRolledUpTo } = await acmeAnalytics(t)
type Link = { uniq: number; domain: string }
const bot = BOT

/** Rows of a tier summed per UTC day, to compare the tiers. */
const perDay = (table: string, time: string) =>
  prisma.$queryRawUnsafe<unknown[]>(
    `SELECT "dimension", date_trunc('day', "${time}", 'UTC')::text AS "day", "value", sum("clicks")::int AS "clicks",
            sum("visitors")::int AS "visitors", sum("bots")::int AS "bots"
     FROM "analytics"."${table}" GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
  )

const folder = (await api.post('/v1/folders', { name: 'F' })).json().id as number
const a: Link = await api.link({ url: 'https://example.com/a', id: 'a', tags: ['promo'] })
const b: Link = await api.link({ url: 'https://example.com/b', id: 'b', folderId: folder })
const c: Link = await api.link({ url: 'https://example.com/c', id: 'c', tags: ['promo'], folderId: folder })

// Around the US DST change (2030-03-10) and Kolkata's midnight (18:30 UTC), at UTC midnights and hour edges.
const visits = [
  visit(a, '2030-03-07T23:59:59Z', 1),
  visit(a, '2030-03-08T00:00:00Z', 1, { country: 'DE' }),
  visit(a, '2030-03-08T18:29:00Z', 2, { device: 'mobile', os: 'iOS', browser: 'Safari' }),
  visit(a, '2030-03-08T18:30:00Z', 3, { referrerHost: null }),
  visit(b, '2030-03-08T18:45:00Z', 2, { destination: 'https://example.com/b' }),
  visit(c, '2030-03-09T05:00:00Z', 4, bot),
  visit(b, '2030-03-09T12:10:00Z', 5, { country: null }),
  visit(c, '2030-03-10T06:59:00Z', 5),
  visit(c, '2030-03-10T07:00:00Z', 6, { browser: 'Firefox', os: 'Linux' }),
  visit(a, '2030-03-10T23:00:00Z', 1),
  visit(b, '2030-03-11T00:30:00Z', 7, { destination: 'https://example.com/rotated', reason: 'rotator' }),
  visit(a, '2030-03-11T10:00:00Z', 2),
  visit(c, '2030-03-11T10:20:00Z', 2, { country: 'IN' }),
  visit(b, '2030-03-12T03:00:00Z', 8),
  visit(a, '2030-03-12T23:30:00Z', 9, bot),
  visit(c, '2030-03-13T14:00:00Z', 1),
]

const RANGES = [
  { from: '2030-03-08T00:00:00Z', to: '2030-03-13T00:00:00Z' },
  { from: '2030-03-07T22:00:00Z', to: '2030-03-12T05:00:00Z' },
  { from: '2030-03-08T18:00:00Z', to: '2030-03-09T19:00:00Z' },
  { from: '2030-03-10T03:00:00Z', to: '2030-03-10T21:00:00Z' },
  { from: '2030-03-01T00:00:00Z', to: '2030-04-01T00:00:00Z' },
]
const VIEWS = [
  { interval: 'hour', timezone: 'Asia/Kolkata' },
  { interval: 'day', timezone: 'UTC' },
  { interval: 'day', timezone: 'Asia/Kolkata' },
  { interval: 'day', timezone: 'America/New_York' },
  { interval: 'week', timezone: 'UTC' },
  { interval: 'week', timezone: 'Asia/Kolkata' },
  { interval: 'month', timezone: 'America/New_York' },
]
const FILTERS = ['', '&domain=go.acme.test', '&tag=promo', `&folderId=${folder}`, `&tag=promo&folderId=${folder}`]

/** Every range, view and filter of the workspace, and every link's own stats. */
async function read() {
  const answers: Record<string, unknown> = {}
  for (const range of RANGES) {
    for (const view of VIEWS) {
      if (view.interval === 'hour' && Date.parse(range.to) - Date.parse(range.from) > 10 * 86_400_000) continue
      const q = new URLSearchParams({ ...range, ...view, limit: '100' }).toString()
      for (const filter of FILTERS) answers[`${q}${filter}`] = (await api.get(`/v1/stats?${q}${filter}`)).json()
      for (const link of [a, b, c]) answers[`${link.uniq}?${q}`] = (await api.get(`/v1/links/${link.uniq}/stats?${q}`)).json()
    }
  }
  return answers
}

t.test('the same answers from raw visits, split in the middle of a day, and all summed in both tiers', async (t) => {
  await setRolledUpTo('2030-01-01T00:00:00Z')
  await storeVisits(database, visits)
  const raw = await read()
  const whole = raw[new URLSearchParams({ ...RANGES[0], ...VIEWS[1], limit: '100' }).toString()] as { totals: unknown }
  t.same(whole.totals, { clicks: 12, visitors: 10, bots: 2 }, 'counted from the raw visits: visitor 2 twice on the 8th and the 11th is one workspace visitor each day')
  t.same(await perDay('LinkDaily', 'day'), [], 'nothing summed yet')

  await app.visitRollup.run(new Date('2030-03-10T06:59:30Z'))
  t.same(await read(), raw, 'split at 06:59:30 on the 10th: the same answers')
  await app.visitRollup.run(new Date('2030-04-01T00:00:00Z'))
  t.same(await read(), raw, 'all summed: the same answers')
  t.same(await perDay('LinkDaily', 'day'), await perDay('LinkHourly', 'hour'), 'the link tiers hold the same visits')
  t.same(await perDay('WorkspaceDaily', 'day'), await perDay('WorkspaceHourly', 'hour'), 'the workspace tiers too')
})

t.test('late visits go into both tiers', async (t) => {
  const before = (await api.get(`/v1/stats?from=2030-03-08T00:00:00Z&to=2030-03-13T00:00:00Z`)).json()
  await storeVisits(database, [visit(b, '2030-03-09T08:00:00Z', 10), visit(c, '2030-03-09T08:10:00Z', 11, bot)])
  const after = (await api.get(`/v1/stats?from=2030-03-08T00:00:00Z&to=2030-03-13T00:00:00Z`)).json()
  t.same(after.totals, { clicks: before.totals.clicks + 1, visitors: before.totals.visitors + 1, bots: before.totals.bots + 1 })
  t.same(await perDay('LinkDaily', 'day'), await perDay('LinkHourly', 'hour'))
  t.same(await perDay('WorkspaceDaily', 'day'), await perDay('WorkspaceHourly', 'hour'))
})

t.test('retention trims both tiers at the same midnight UTC', async (t) => {
  // A cutoff at 15:00 on the 10th: both tiers keep the 10th whole and drop what was before.
  const cutoff = Date.parse('2030-03-10T15:00:00Z')
  await dropExpired(prisma, new Date(cutoff + 30 * 86_400_000), 30)
  const [{ before, kept }] = await prisma.$queryRawUnsafe<{ before: number; kept: number }[]>(
    `SELECT (SELECT count(*) FROM "analytics"."LinkHourly" WHERE "hour" < '2030-03-10T00:00:00Z')
          + (SELECT count(*) FROM "analytics"."WorkspaceHourly" WHERE "hour" < '2030-03-10T00:00:00Z')
          + (SELECT count(*) FROM "analytics"."LinkDaily" WHERE "day" < '2030-03-10T00:00:00Z')
          + (SELECT count(*) FROM "analytics"."WorkspaceDaily" WHERE "day" < '2030-03-10T00:00:00Z') AS "before",
            (SELECT count(*) FROM "analytics"."LinkDaily" WHERE "day" = '2030-03-10T00:00:00Z') AS "kept"`,
  )
  t.equal(Number(before), 0, 'nothing before the midnight is left in either tier')
  t.ok(Number(kept) > 0, 'the day of the cutoff stays')
  t.same(await perDay('LinkDaily', 'day'), await perDay('LinkHourly', 'hour'), 'the tiers still agree')
  t.same(await perDay('WorkspaceDaily', 'day'), await perDay('WorkspaceHourly', 'hour'))
  const stats = (await api.get(`/v1/stats?from=2030-03-08T00:00:00Z&to=2030-03-13T00:00:00Z`)).json()
  const edges = (await api.get(`/v1/stats?from=2030-03-08T05:00:00Z&to=2030-03-12T05:00:00Z`)).json()
  t.same(stats.totals, { clicks: 7, visitors: 6, bots: 1 }, 'what is left: the 10th to the 12th')
  t.same(edges.totals, { clicks: 7, visitors: 6, bots: 0 }, 'and up to 05:00 on the 12th (the bot came at 23:30)')
})

t.test('top links: read from the candidates when that is exact, from every link when not', async (t) => {
  const ownToken = await createWorkspaceToken(prisma, { workspace: 'tops', defaultDomain: 'go.tops.test' })
  const own = apiClient(app, ownToken)
  const links: Link[] = []
  for (let i = 0; i < 7; i++) links.push(await own.link({ url: `https://example.com/${i}`, id: `t${i}`, tags: ['t'] }))
  const wsId = (await prisma.workspace.findUniqueOrThrow({ where: { name: 'tops' } })).id
  const batch: StoredVisit[] = []
  // Links 0 to 4: many clicks in January; link 5: two in March, link 6: one in March.
  for (let i = 0; i < 5; i++) for (let n = 0; n < 10 - i; n++) batch.push({ ...visit(links[i], `2031-01-0${1 + i}T10:0${n}:00Z`, n), workspaceId: wsId })
  batch.push({ ...visit(links[5], '2031-03-02T10:00:00Z', 1), workspaceId: wsId }, { ...visit(links[5], '2031-03-02T11:00:00Z', 2), workspaceId: wsId })
  batch.push({ ...visit(links[6], '2031-03-03T10:00:00Z', 3), workspaceId: wsId })

  await storeVisits(database, batch)
  const top = async (params: string) =>
    (await own.get(`/v1/stats?limit=1&${params}`)).json().top.links.map((link: { slug: string; clicks: number }) => [link.slug, link.clicks])
  const read = async () => ({
    march: await top('from=2031-03-01T00:00:00Z&to=2031-04-01T00:00:00Z'),
    marchTag: await top('from=2031-03-01T00:00:00Z&to=2031-04-01T00:00:00Z&tag=t'),
    all: await top('from=2031-01-01T00:00:00Z&to=2031-04-01T00:00:00Z'),
    allTag: await top('from=2031-01-01T00:00:00Z&to=2031-04-01T00:00:00Z&tag=t'),
  })
  const raw = await read()
  t.same(raw.march, [['t5', 2]], 'the five busiest links of all time had no click in March: every link is summed')
  t.same(raw.marchTag, [['t5', 2]], 'with a tag too')
  t.same(raw.all, [['t0', 10]], 'the busiest link of all time is the busiest of the range')
  t.same(raw.allTag, [['t0', 10]])
  await app.visitRollup.run(new Date('2031-06-01T00:00:00Z'))
  t.same(await read(), raw, 'the same once summed (bounds from LinkClicks instead of the raw visits)')
})
