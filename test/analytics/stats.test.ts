/**
 * Issue 11, stats: link and workspace stats (totals, every breakdown, every interval, time zones across DST
 * changes, range edges and rounding, filters, isolation), a link's visits in pages, every 400, and the
 * all-time clicks on the link record. Visits go in through storeVisits, the recorder's own way in.
 */
import t from 'tap'
import { storeVisits } from '../../src/analytics/visit-store.js'
import { zoneCacheSizes } from '../../src/analytics/stats-range.js'
import { apiClient } from '../support/api-client.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'
import { storedVisit } from './stored-visit.js'

type Json = Record<string, any>

// The visits here are of fixed days of 2026: kept, and listed, whatever the day the tests run.
const { app, prisma, database } = await buildTestApp(t, { env: { VISIT_RETENTION_DAYS: '36500' } })

let workspaces = 0
async function workspace() {
  const name = `ws${++workspaces}`
  const domain = `go.${name}.test`
  const token = await createWorkspaceToken(prisma, { workspace: name, defaultDomain: domain })
  const workspaceId = (await prisma.workspace.findUniqueOrThrow({ where: { name } })).id
  return { name, domain, workspaceId, token, api: apiClient(app, token) }
}

type Link = { uniq: number; domain: string; id: string; workspaceId: number }

const visit = storedVisit
const bot = { bot: true, device: 'bot', os: null, browser: null, answer: 'crawler' } as const
const query = (params: Record<string, string | number>) => new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)])).toString()

const { api, domain, workspaceId, token } = await workspace()
const other = await workspace()
const l1: Link = await api.link({ url: 'https://example.com/a', id: 'one', tags: ['Promo'] })
const l2: Link = await api.link({ url: 'https://example.com/b', id: 'two' })
const quiet: Link = await api.link({ url: 'https://example.com/c', id: 'quiet' })
const foreign: Link = await other.api.link({ url: 'https://example.com/x', id: 'one' })

// l1: four clicks by two people over two UTC days, one bot; every breakdown has a known unknown.
await storeVisits(database, [
  visit(l1, '2026-03-10T10:15:00Z', 1, { referrerHost: 'news.example' }),
  visit(l1, '2026-03-10T10:45:00Z', 2, { device: 'mobile', os: 'iOS', browser: 'Safari' }),
  visit(l1, '2026-03-10T11:00:00Z', 1, { country: 'FR', referrerHost: 'news.example', device: 'mobile', os: 'iOS', browser: 'Safari' }),
  visit(l1, '2026-03-10T12:00:00Z', 3, bot),
])
await storeVisits(database, [visit(l1, '2026-03-11T09:00:00Z', 1, { country: null, os: null, browser: null, destination: 'https://example.com/b' })])
// l2: visitor 1 again on 03-10 (a new visitor of l2, not of the workspace), and the DST days.
await storeVisits(database, [
  visit(l2, '2026-03-10T13:00:00Z', 1),
  visit(l2, '2026-10-24T22:30:00Z', 5), // 00:30 on 10-25 in Paris (CEST)
  visit(l2, '2026-10-25T22:30:00Z', 6), // 23:30 on 10-25 in Paris (CET): the 25-hour day
  visit(l2, '2026-10-25T23:30:00Z', 7), // 00:30 on 10-26 in Paris
  visit(l2, '2026-11-02T04:30:00Z', 8), // 23:30 on 11-01 in New York (EST), 11-02 in UTC
])
await storeVisits(database, [visit(foreign, '2026-03-10T10:00:00Z', 9), visit(foreign, '2026-03-10T10:05:00Z', 10)])

const MARCH = { from: '2026-03-10T00:00:00Z', to: '2026-03-12T00:00:00Z' }

t.test('link stats: totals, daily series and every top list, by uniq and by domain/slug', async (t) => {
  const response = await api.get(`/v1/links/${l1.uniq}/stats?${query(MARCH)}`)
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^application\/json/)
  const expected = {
    link: { uniq: l1.uniq, domain, slug: 'one' },
    from: '2026-03-10T00:00:00+00:00',
    to: '2026-03-12T00:00:00+00:00',
    timezone: 'UTC',
    interval: 'day',
    totals: { clicks: 4, visitors: 3, bots: 1 },
    series: [
      { start: '2026-03-10T00:00:00+00:00', clicks: 3, visitors: 2, bots: 1 },
      { start: '2026-03-11T00:00:00+00:00', clicks: 1, visitors: 1, bots: 0 },
    ],
    top: {
      // Most clicks first; ties by value, unknown ('' stored, null shown) first.
      countries: [{ value: 'US', clicks: 2, visitors: 2 }, { value: null, clicks: 1, visitors: 1 }, { value: 'FR', clicks: 1, visitors: 0 }],
      referrers: [{ value: null, clicks: 2, visitors: 2 }, { value: 'news.example', clicks: 2, visitors: 1 }],
      devices: [{ value: 'desktop', clicks: 2, visitors: 2 }, { value: 'mobile', clicks: 2, visitors: 1 }],
      os: [{ value: 'iOS', clicks: 2, visitors: 1 }, { value: null, clicks: 1, visitors: 1 }, { value: 'Windows', clicks: 1, visitors: 1 }],
      browsers: [{ value: 'Safari', clicks: 2, visitors: 1 }, { value: null, clicks: 1, visitors: 1 }, { value: 'Chrome', clicks: 1, visitors: 1 }],
      destinations: [{ value: 'https://example.com/a', clicks: 3, visitors: 2 }, { value: 'https://example.com/b', clicks: 1, visitors: 1 }],
    },
  }
  t.same(response.json(), expected)
  const byDomain = await api.get(`/v1/links/by-domain/${domain.toUpperCase()}/ONE/stats?${query(MARCH)}`)
  t.equal(byDomain.statusCode, 200)
  t.same(byDomain.json(), expected, 'the same answer by domain and slug, in any case')

  const top1 = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ ...MARCH, limit: 1 })}`)).json()
  t.same(top1.top.countries, [{ value: 'US', clicks: 2, visitors: 2 }], 'limit cuts every list')
  t.same(top1.top.os, [{ value: 'iOS', clicks: 2, visitors: 1 }])
})

t.test('intervals: hour, week (Mondays) and month, every bucket with zeros', async (t) => {
  const hourly = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-10T10:00:00Z', to: '2026-03-10T14:00:00Z', interval: 'hour' })}`)).json()
  t.same(hourly.series, [
    { start: '2026-03-10T10:00:00+00:00', clicks: 2, visitors: 2, bots: 0 },
    { start: '2026-03-10T11:00:00+00:00', clicks: 1, visitors: 0, bots: 0 },
    { start: '2026-03-10T12:00:00+00:00', clicks: 0, visitors: 0, bots: 1 },
    { start: '2026-03-10T13:00:00+00:00', clicks: 0, visitors: 0, bots: 0 },
  ])
  const weekly = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-01T00:00:00Z', to: '2026-03-31T00:00:00Z', interval: 'week' })}`)).json()
  t.same(weekly.series.map((b: Json) => [b.start, b.clicks]), [
    ['2026-02-23T00:00:00+00:00', 0], // the week holding `from` (a Sunday) starts on the Monday before
    ['2026-03-02T00:00:00+00:00', 0],
    ['2026-03-09T00:00:00+00:00', 4],
    ['2026-03-16T00:00:00+00:00', 0],
    ['2026-03-23T00:00:00+00:00', 0],
    ['2026-03-30T00:00:00+00:00', 0],
  ])
  const monthly = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-01-15T00:00:00Z', to: '2026-04-01T00:00:00Z', interval: 'month' })}`)).json()
  t.same(monthly.series, [
    { start: '2026-01-01T00:00:00+00:00', clicks: 0, visitors: 0, bots: 0 },
    { start: '2026-02-01T00:00:00+00:00', clicks: 0, visitors: 0, bots: 0 },
    { start: '2026-03-01T00:00:00+00:00', clicks: 4, visitors: 3, bots: 1 },
  ])
  t.same(monthly.totals, { clicks: 4, visitors: 3, bots: 1 })
})

t.test('range edges: a visit at from counts, one at to does not; from rounds down and to up to the hour', async (t) => {
  const edge = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-10T11:00:00Z', to: '2026-03-10T12:00:00Z' })}`)).json()
  t.same(edge.totals, { clicks: 1, visitors: 0, bots: 0 }, 'the 11:00 visit counts; the 12:00 bot is at `to`')
  const rounded = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-10T10:30:00Z', to: '2026-03-10T11:00:01Z' })}`)).json()
  t.equal(rounded.from, '2026-03-10T10:00:00+00:00')
  t.equal(rounded.to, '2026-03-10T12:00:00+00:00')
  t.same(rounded.totals, { clicks: 3, visitors: 2, bots: 0 }, 'the 10:15 visit counts: the whole hour of from')
  const offset = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-10T12:00:00+01:00', to: '2026-03-10T13:00:00+01:00' })}`)).json()
  t.same(offset.totals, { clicks: 1, visitors: 0, bots: 0 }, 'an offset in from and to is honoured (11:00 UTC)')
})

t.test('range edges past the millisecond: digits a JavaScript Date would drop still count', async (t) => {
  const to = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-10T10:00:00Z', to: '2026-03-10T11:00:00.0001Z' })}`)).json()
  t.equal(to.to, '2026-03-10T12:00:00+00:00', 'a to just past 11:00 rounds up to 12:00')
  t.same(to.totals, { clicks: 3, visitors: 2, bots: 0 }, 'so the 11:00 visit counts')
  const close = await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-10T11:00:00.0001Z', to: '2026-03-10T11:00:00.0002Z' })}`)
  t.equal(close.statusCode, 200, 'a from before to by a tenth of a millisecond is before it')
  t.equal(close.json().totals.clicks, 1)

  // A visit stored to the microsecond (as the database keeps them), listed by /visits around it.
  const link: Link = await api.link({ url: 'https://example.com/micro', id: 'micro' })
  await database.query(
    `INSERT INTO "analytics"."Visit" ("at", "linkUniq", "workspaceId", "domain", "device", "destination", "reason", "answer", "bot", "visitor", "firstOfDay", "firstOfWorkspaceDay")
     VALUES ('2026-03-10T00:10:28.907796Z', $1, $2, $3, 'desktop', 'https://example.com/micro', 'default', 'redirect', false, 1, true, false)`,
    [link.uniq, workspaceId, domain],
  )
  const listed = async (range: Record<string, string>) => (await api.get(`/v1/links/${link.uniq}/visits?${query(range)}`)).json().visits.length
  t.equal(await listed({ from: '2026-03-10T00:10:28.9079Z' }), 0, 'not at or after a from 104 µs later')
  t.equal(await listed({ from: '2026-03-10T00:10:28.907796Z' }), 1, 'at from: listed')
  t.equal(await listed({ from: '2026-03-10T00:10:28.9077964Z' }), 0, 'not at or after a from 0.4 µs later (not rounded to the nearest µs)')
  t.equal(await listed({ to: '2026-03-10T00:10:28.9079Z' }), 1, 'before a to 104 µs later: listed')
  t.equal(await listed({ to: '2026-03-10T00:10:28.9077964Z' }), 1, 'before a to 0.4 µs later: listed')
  t.equal(await listed({ to: '2026-03-10T00:10:28.907796Z' }), 0, 'at to: not listed')
  t.equal(await listed({ to: '2026-03-10T00:10:28.9999999Z', from: '2026-03-10T00:10:28.9079Z' }), 0, 'a carry into the next millisecond')
  const reversed = await api.get(`/v1/links/${link.uniq}/visits?${query({ from: '2026-03-10T00:10:28.9072Z', to: '2026-03-10T00:10:28.9071Z' })}`)
  t.equal(reversed.statusCode, 400, 'a from after to by a tenth of a millisecond is a 400')
})

t.test('a zone whose offset had seconds (Africa/Monrovia before 1972): RFC 3339 offsets, exact instants', async (t) => {
  const stats = (await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '1970-01-01T00:00:00Z', to: '1970-01-03T00:00:00Z', timezone: 'Africa/Monrovia' })}`)).json()
  const rfc3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$/
  for (const text of [stats.from, stats.to, ...stats.series.map((bucket: Json) => bucket.start)]) t.match(text, rfc3339, text)
  t.equal(new Date(stats.from).toISOString(), '1970-01-01T00:00:00.000Z', 'from names the instant asked for')
  t.equal(new Date(stats.to).toISOString(), '1970-01-03T00:00:00.000Z')
  // Local midnight at -00:44:30 is 00:44:30 UTC.
  t.equal(new Date(stats.series[1].start).toISOString(), '1970-01-01T00:44:30.000Z', 'a day starts at local midnight')
})

t.test('default range: the 30 days up to now', async (t) => {
  const link: Link = await api.link({ url: 'https://example.com/now', id: 'recent' })
  const now = Date.now()
  await storeVisits(database, [visit(link, new Date(now - 3_600_000).toISOString(), 1), visit(link, new Date(now - 40 * 86_400_000).toISOString(), 2)])
  const body = (await api.get(`/v1/links/${link.uniq}/stats`)).json()
  t.same(body.totals, { clicks: 1, visitors: 1, bots: 0 }, 'the visit of 40 days ago is outside')
  t.equal(Date.parse(body.to) - Date.parse(body.from), 30 * 86_400_000)
  t.ok(Date.parse(body.to) >= now && Date.parse(body.to) - now <= 3_600_000, 'to: now rounded up to the hour')
  t.equal(body.series.length, body.to.includes('T00:00:00') ? 30 : 31, 'the day buckets the range touches')
})

t.test('without a to, the 400 days run until now, not until the hour it is rounded up to', async (t) => {
  const link: Link = await api.link({ url: 'https://example.com/longest', id: 'longest-default' })
  const fiveMinutes = 300_000
  const from = (offset: number) => new Date(Date.now() - 400 * 86_400_000 + offset).toISOString()
  const within = await api.get(`/v1/links/${link.uniq}/stats?${query({ from: from(fiveMinutes), interval: 'month' })}`)
  t.equal(within.statusCode, 200, 'five minutes short of 400 days')
  const beyond = await api.get(`/v1/links/${link.uniq}/stats?${query({ from: from(-fiveMinutes), interval: 'month' })}`)
  t.equal(beyond.statusCode, 400, 'five minutes beyond')
  t.match(beyond.json(), { errors: [{ path: '/from', message: /at most 400 days/ }] })
})

t.test('Europe/Paris across the end of summer time: a day of 25 hours, offsets on every start', async (t) => {
  const daily = await api.get(`/v1/links/${l2.uniq}/stats?${query({ from: '2026-10-24T00:00:00+02:00', to: '2026-10-27T00:00:00+01:00', timezone: 'Europe/Paris' })}`)
  t.equal(daily.statusCode, 200)
  const body = daily.json()
  t.equal(body.timezone, 'Europe/Paris')
  t.equal(body.from, '2026-10-24T00:00:00+02:00')
  t.equal(body.to, '2026-10-27T00:00:00+01:00')
  t.same(body.series.map((b: Json) => [b.start, b.clicks]), [
    ['2026-10-24T00:00:00+02:00', 0],
    ['2026-10-25T00:00:00+02:00', 2],
    ['2026-10-26T00:00:00+01:00', 1],
  ])
  const hours = (await api.get(`/v1/links/${l2.uniq}/stats?${query({ from: '2026-10-25T00:00:00+02:00', to: '2026-10-26T00:00:00+01:00', timezone: 'Europe/Paris', interval: 'hour' })}`)).json()
  t.equal(hours.series.length, 25, 'the local day of the change has 25 hours')
  const starts = hours.series.map((b: Json) => b.start)
  t.ok(starts.includes('2026-10-25T02:00:00+02:00') && starts.includes('2026-10-25T02:00:00+01:00'), '02:00 twice, with both offsets')
  t.equal(starts[24], '2026-10-25T23:00:00+01:00')
  t.equal(hours.series[24].clicks, 1)

  const spring = (await api.get(`/v1/links/${l2.uniq}/stats?${query({ from: '2026-03-29T00:00:00+01:00', to: '2026-03-30T00:00:00+02:00', timezone: 'Europe/Paris', interval: 'hour' })}`)).json()
  t.equal(spring.series.length, 23, 'and the first day of summer time 23')
  t.equal(spring.series[2].start, '2026-03-29T03:00:00+02:00')
})

t.test('America/New_York across the end of daylight time', async (t) => {
  const body = (await api.get(`/v1/links/${l2.uniq}/stats?${query({ from: '2026-10-31T00:00:00-04:00', to: '2026-11-03T00:00:00-05:00', timezone: 'America/New_York' })}`)).json()
  t.same(body.series.map((b: Json) => [b.start, b.clicks]), [
    ['2026-10-31T00:00:00-04:00', 0],
    ['2026-11-01T00:00:00-04:00', 1],
    ['2026-11-02T00:00:00-05:00', 0],
  ], "04:30 UTC on 11-02 is the evening of 11-01 in New York")
  const utc = (await api.get(`/v1/links/${l2.uniq}/stats?${query({ from: '2026-11-01T00:00:00Z', to: '2026-11-03T00:00:00Z' })}`)).json()
  t.same(utc.series.map((b: Json) => b.clicks), [0, 1], 'and 11-02 in UTC')
  const zone = (await api.get(`/v1/links/${l2.uniq}/stats?${query({ ...MARCH, timezone: 'america/new_york' })}`)).json()
  t.equal(zone.timezone, 'America/New_York', 'the zone is echoed by its canonical name')
  const kolkata = await api.get(`/v1/links/${l2.uniq}/stats?${query({ ...MARCH, timezone: 'Asia/Kolkata' })}`)
  t.equal(kolkata.statusCode, 200)
  t.equal(kolkata.json().timezone, 'Asia/Kolkata', 'a current name is not swapped for the older alias ICU prefers (Asia/Calcutta)')
  t.match(kolkata.json().series[0].start, /\+05:30$/, 'and the series is cut in that zone')
  const lower = (await api.get(`/v1/links/${l2.uniq}/stats?${query({ ...MARCH, timezone: 'asia/kolkata' })}`)).json()
  t.equal(lower.timezone, 'Asia/Calcutta', 'a name in another case has no spelling to keep: ICU\'s is given')
  // Three-letter ids ICU takes as zones and PostgreSQL as abbreviations of other offsets (IST is +02:00 there).
  for (const [id, zone, offset] of [['IST', 'Asia/Calcutta', '+05:30'], ['PST', 'America/Los_Angeles', '-0[78]:00'], ['ACT', 'Australia/Darwin', '+09:30']]) {
    const body = (await api.get(`/v1/links/${l2.uniq}/stats?${query({ ...MARCH, timezone: id })}`)).json()
    t.equal(body.timezone, zone, `${id}: named as the zone ICU reads it as`)
    t.match(body.from, new RegExp(`${offset.replace('+', '\\+')}$`), `${id}: the range named in its offset`)
    t.ok(body.series.every((bucket: Json) => new RegExp(`T00:00:00${offset.replace('+', '\\+')}$`).test(bucket.start)), `${id}: every bucket too, cut in the same zone`)
  }
})

t.test('hours in zones that are not whole hours from UTC: a half-hour DST change, a half-hour offset', async (t) => {
  const link: Link = await api.link({ url: 'https://example.com/half', id: 'half' })
  // Lord Howe Island goes from +11:00 to +10:30 at 2026-04-04T15:00Z (02:00 local becomes 01:30).
  await storeVisits(database, [visit(link, '2026-04-04T14:10:00Z', 1), visit(link, '2026-04-04T15:10:00Z', 2), visit(link, '2026-04-04T16:40:00Z', 3)])
  const range = { from: '2026-04-04T13:00:00Z', to: '2026-04-04T18:00:00Z', interval: 'hour' }
  const lordHowe = (await api.get(`/v1/links/${link.uniq}/stats?${query({ ...range, timezone: 'Australia/Lord_Howe' })}`)).json()
  t.same(lordHowe.totals, { clicks: 3, visitors: 3, bots: 0 }, 'every visit counted, as in UTC')
  t.same(lordHowe.series.map((b: Json) => [b.start, b.clicks]), [
    ['2026-04-05T00:00:00+11:00', 0],
    ['2026-04-05T01:00:00+11:00', 1],
    // 15:00Z is 01:30 local after the change, in the local hour 01:00-02:00 (+10:30), which begins at 14:30Z: still
    // 01:30 in +11:00, the offset of that instant.
    ['2026-04-05T01:30:00+11:00', 1],
    ['2026-04-05T02:00:00+10:30', 1],
    ['2026-04-05T03:00:00+10:30', 0],
  ], 'the local hour each UTC hour starts in')
  const kolkata = (await api.get(`/v1/links/${link.uniq}/stats?${query({ ...range, to: '2026-04-04T15:00:00Z', timezone: 'Asia/Kolkata' })}`)).json()
  t.same(kolkata.series.map((b: Json) => [b.start, b.clicks]), [['2026-04-04T18:00:00+05:30', 0], ['2026-04-04T19:00:00+05:30', 1]], 'two UTC hours, two buckets, none empty past the end')
})

t.test('days, weeks and months from a day whose midnight does not exist (DST starting at 00:00)', async (t) => {
  // Santiago de Chile goes from -04:00 to -03:00 at 2026-09-06T04:00Z: that day starts at 01:00 local.
  const link: Link = await api.link({ url: 'https://example.com/santiago', id: 'santiago' })
  await storeVisits(database, [
    visit(link, '2026-09-06T10:00:00Z', 11), // 07:00 on 09-06 local
    visit(link, '2026-09-07T03:30:00Z', 12), // 00:30 on 09-07 local
    visit(link, '2026-09-08T20:00:00Z', 13), // 17:00 on 09-08 local
  ])
  const range = { from: '2026-09-06T05:00:00Z', to: '2026-09-09T03:00:00Z', timezone: 'America/Santiago' }
  const days = (await api.get(`/v1/links/${link.uniq}/stats?${query(range)}`)).json()
  t.same(days.totals, { clicks: 3, visitors: 3, bots: 0 }, 'every visit counted')
  t.same(days.series.map((b: Json) => [b.start, b.clicks]), [
    ['2026-09-06T01:00:00-03:00', 1],
    ['2026-09-07T00:00:00-03:00', 1],
    ['2026-09-08T00:00:00-03:00', 1],
  ], 'the first day as it began (01:00, its midnight skipped), the others at midnight')
  for (const interval of ['week', 'month']) {
    const body = (await api.get(`/v1/links/${link.uniq}/stats?${query({ ...range, interval })}`)).json()
    t.same(body.totals, { clicks: 3, visitors: 3, bots: 0 }, `by ${interval}: every visit counted`)
  }
  const workspaceDays = (await api.get(`/v1/stats?${query(range)}`)).json()
  t.same(workspaceDays.series.map((b: Json) => b.clicks), [1, 1, 1], 'the workspace series alike')
})

t.test('a link without visits: zeros in every bucket, empty lists', async (t) => {
  const body = (await api.get(`/v1/links/${quiet.uniq}/stats?${query(MARCH)}`)).json()
  t.same(body.totals, { clicks: 0, visitors: 0, bots: 0 })
  t.same(body.series, [
    { start: '2026-03-10T00:00:00+00:00', clicks: 0, visitors: 0, bots: 0 },
    { start: '2026-03-11T00:00:00+00:00', clicks: 0, visitors: 0, bots: 0 },
  ])
  t.same(body.top, { countries: [], referrers: [], devices: [], os: [], browsers: [], destinations: [] })
})

t.test('workspace stats: the whole workspace, a domain, a tag, a folder; deleted links leave the top', async (t) => {
  const all = await api.get(`/v1/stats?${query(MARCH)}`)
  t.equal(all.statusCode, 200)
  const body = all.json()
  t.same(body.totals, { clicks: 5, visitors: 3, bots: 1 }, 'visitor 1 on l2 the same day is no new visitor of the workspace')
  t.same(body.series.map((b: Json) => b.clicks), [4, 1])
  t.same(body.top.links, [
    { uniq: l1.uniq, domain, slug: 'one', clicks: 4, visitors: 3 },
    { uniq: l2.uniq, domain, slug: 'two', clicks: 1, visitors: 1 },
  ], "each link's own visitors: visitor 1 is a new visitor of l2, as l2's own stats say")
  t.same(body.top.countries[0], { value: 'US', clicks: 3, visitors: 2 })
  t.notOk('link' in body, 'no link field on workspace stats')

  t.same((await api.get(`/v1/stats?${query({ ...MARCH, domain: domain.toUpperCase() })}`)).json().totals, body.totals, 'the domain filter')
  t.same((await api.get(`/v1/stats?${query({ ...MARCH, domain: 'short.test' })}`)).json().totals, { clicks: 0, visitors: 0, bots: 0 })
  const other400 = await api.get(`/v1/stats?${query({ ...MARCH, domain: other.domain })}`)
  t.equal(other400.statusCode, 400, "another workspace's domain")
  t.match(other400.json(), { code: 'validation_failed', errors: [{ path: '/domain' }] })

  const tagged = (await api.get(`/v1/stats?tag=promo&${query(MARCH)}`)).json()
  t.same(tagged.totals, { clicks: 4, visitors: 3, bots: 1 })
  t.same(tagged.top.links.map((l: Json) => l.uniq), [l1.uniq])
  t.same(tagged.top.destinations, [{ value: 'https://example.com/a', clicks: 3, visitors: 2 }, { value: 'https://example.com/b', clicks: 1, visitors: 1 }])

  const folder = await api.post('/v1/folders', { name: 'F' })
  t.equal(folder.statusCode, 201)
  t.equal((await api.put(`/v1/links/${l2.uniq}`, { link: { folderId: folder.json().id } })).statusCode, 200)
  const inFolder = (await api.get(`/v1/stats?${query({ ...MARCH, folderId: folder.json().id })}`)).json()
  t.same(inFolder.totals, { clicks: 1, visitors: 1, bots: 0 }, 'summed per link: visitor 1 is a new visitor of l2')
  t.same(inFolder.top.links.map((l: Json) => l.slug), ['two'])
  t.same((await api.get(`/v1/stats?tag=promo&${query({ ...MARCH, folderId: folder.json().id })}`)).json().totals, { clicks: 0, visitors: 0, bots: 0 }, 'all filters must match')

  const gone: Link = await api.link({ url: 'https://example.com/gone', id: 'gone' })
  await storeVisits(database, [visit(gone, '2026-03-10T15:00:00Z', 20), visit(gone, '2026-03-10T15:01:00Z', 21), visit(gone, '2026-03-10T15:02:00Z', 22), visit(gone, '2026-03-10T15:03:00Z', 23), visit(gone, '2026-03-10T15:04:00Z', 24)])
  t.equal((await api.get(`/v1/stats?${query(MARCH)}`)).json().top.links[0].slug, 'gone')
  t.equal((await api.delete(`/v1/links/${gone.uniq}`)).statusCode, 204)
  const after = (await api.get(`/v1/stats?${query(MARCH)}`)).json()
  t.same(after.top.links.map((l: Json) => l.slug), ['one', 'two'], 'a deleted link leaves the top links')
  t.equal(after.totals.clicks, 10, 'its visits stay in the totals')
})

t.test('workspaces are isolated', async (t) => {
  const theirs = (await other.api.get(`/v1/stats?${query(MARCH)}`)).json()
  t.same(theirs.totals, { clicks: 2, visitors: 2, bots: 0 })
  t.same(theirs.top.links.map((l: Json) => l.uniq), [foreign.uniq])
  for (const url of [`/v1/links/${foreign.uniq}/stats`, `/v1/links/by-domain/${other.domain}/one/stats`, `/v1/links/${foreign.uniq}/visits`, '/v1/links/999999/stats']) {
    const response = await api.get(url)
    t.equal(response.statusCode, 404, url)
    t.match(response.headers['content-type'], /^application\/problem\+json/)
    t.equal(response.json().code, 'not_found')
  }
})

t.test('an empty or blank tag filter is a 400, not the whole workspace', async (t) => {
  for (const tag of ['', '%20']) {
    const response = await api.get(`/v1/stats?tag=${tag}&${query(MARCH)}`)
    t.equal(response.statusCode, 400)
    t.match(response.json(), { code: 'validation_failed', errors: [{ path: '/tag', message: 'must not be blank' }] })
  }
})

t.test('401 without a token on every stats route', async (t) => {
  for (const url of [`/v1/links/${l1.uniq}/stats`, `/v1/links/by-domain/${domain}/one/stats`, '/v1/stats', `/v1/links/${l1.uniq}/visits`]) {
    const response = await app.inject({ method: 'GET', url })
    t.equal(response.statusCode, 401, url)
    t.equal(response.json().code, 'unauthorized')
  }
})

t.test('400s name the parameter', async (t) => {
  const cases: [string, string][] = [
    [`/v1/links/${l1.uniq}/stats?from=yesterday`, '/from'],
    [`/v1/links/${l1.uniq}/stats?to=2026-13-01T00:00:00Z`, '/to'],
    [`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-10T00:00:00Z', to: '2026-03-10T00:00:00Z' })}`, '/from'],
    [`/v1/links/${l1.uniq}/stats?${query({ from: '2026-03-11T00:00:00Z', to: '2026-03-10T00:00:00Z' })}`, '/from'],
    [`/v1/links/${l1.uniq}/stats?${query({ from: '2025-01-01T00:00:00Z', to: '2026-03-10T00:00:00Z' })}`, '/from'],
    [`/v1/links/${l1.uniq}/stats?timezone=Mars/Olympus`, '/timezone'],
    [`/v1/links/${l1.uniq}/stats?timezone=%2B01:00`, '/timezone'],
    [`/v1/links/${l1.uniq}/stats?interval=fortnight`, '/interval'],
    [`/v1/links/${l1.uniq}/stats?interval=hour`, '/interval'], // 30 days of hours: 720 buckets is fine…
    [`/v1/links/${l1.uniq}/stats?${query({ ...MARCH, limit: 0 })}`, '/limit'],
    [`/v1/links/${l1.uniq}/stats?${query({ ...MARCH, limit: 101 })}`, '/limit'],
    ['/v1/stats?folderId=abc', '/folderId'],
    ['/v1/stats?domain=not..a..host', '/domain'],
    [`/v1/links/${l1.uniq}/visits?cursor=nope!`, '/cursor'],
    [`/v1/links/${l1.uniq}/visits?cursor=${Buffer.from('{"t":1}').toString('base64url')}`, '/cursor'],
    [`/v1/links/${l1.uniq}/visits?limit=1001`, '/limit'],
    [`/v1/links/${l1.uniq}/visits?${query({ from: '2026-03-11T00:00:00Z', to: '2026-03-10T00:00:00Z' })}`, '/from'],
    ['/v1/links/abc/stats', '/uniqId'],
    // Dates at the calendar's ends pass the format; rounded to the hour or moved to a zone they were a 500.
    [`/v1/links/${l1.uniq}/stats?to=9999-12-31T23:30:00Z`, '/to'],
    [`/v1/links/${l1.uniq}/stats?${query({ from: '9999-12-31T00:00:00Z', to: '9999-12-31T23:00:00-05:00' })}`, '/to'],
    [`/v1/links/${l1.uniq}/stats?${query({ from: '0000-01-01T00:00:00Z', to: '0000-01-02T00:00:00Z' })}`, '/to'],
    [`/v1/links/${l1.uniq}/visits?to=9999-12-31T23:00:00-05:00`, '/to'],
    [`/v1/links/${l1.uniq}/visits?from=0000-01-01T00:00:00Z`, '/from'],
    [`/v1/links/${l1.uniq}/visits?cursor=${Buffer.from('{"t":"-300000000000000000","s":"1"}').toString('base64url')}`, '/cursor'],
    [`/v1/links/${l1.uniq}/visits?cursor=${Buffer.from('{"t":"999999999999999999","s":"1"}').toString('base64url')}`, '/cursor'],
  ]
  for (const [url, path] of cases) {
    const response = await api.get(url)
    if (url.endsWith('interval=hour')) {
      t.equal(response.statusCode, 200, '720 hourly buckets are within the bound')
      continue
    }
    t.equal(response.statusCode, 400, url)
    t.match(response.headers['content-type'], /^application\/problem\+json/)
    t.match(response.json(), { code: 'validation_failed', errors: [{ path }] }, url)
  }
  t.match((await api.get(`/v1/links/${l1.uniq}/stats?interval=fortnight`)).json().errors, [{ message: 'must be one of: hour, day, week, month' }])
  const tooMany = await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-01-01T00:00:00Z', to: '2026-03-01T00:00:00Z', interval: 'hour' })}`)
  t.equal(tooMany.statusCode, 400)
  t.match(tooMany.json(), { errors: [{ path: '/interval', message: /more than 1000 buckets/ }] })
  const exactly = await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2026-01-01T00:00:00Z', to: '2026-02-11T16:00:00Z', interval: 'hour' })}`)
  t.equal(exactly.statusCode, 200, 'exactly 1000 hourly buckets')
  t.equal(exactly.json().series.length, 1000)
  // The 400 days are counted as asked, not after rounding out to whole hours.
  const longest = await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2025-02-10T00:30:00Z', to: '2026-03-17T00:30:00Z', interval: 'month' })}`)
  t.equal(longest.statusCode, 200, 'exactly 400 days, off the hour')
  const longer = await api.get(`/v1/links/${l1.uniq}/stats?${query({ from: '2025-02-10T00:30:00Z', to: '2026-03-17T00:30:01Z', interval: 'month' })}`)
  t.match(longer.json(), { errors: [{ path: '/from', message: /at most 400 days/ }] }, 'a second more')
  const earliest = await api.get(`/v1/links/${l1.uniq}/visits?from=1970-01-01T00:00:00Z&to=9999-12-31T00:00:00Z`)
  t.equal(earliest.statusCode, 200, 'the widest range of visits')
})

t.test("a link's visits: newest first, in pages with neither duplicates nor gaps, even while visits arrive", async (t) => {
  const link: Link = await api.link({ url: 'https://example.com/paged', id: 'paged' })
  // Several visits share a millisecond: the position must still be unique.
  const visits = Array.from({ length: 25 }, (_, i) =>
    visit(link, new Date(Date.UTC(2026, 2, 10, 10, 0, Math.floor(i / 3))).toISOString(), i, { destination: `https://example.com/v${i}` }))
  await storeVisits(database, visits.slice(0, 13))
  await storeVisits(database, visits.slice(13))
  const seen: Json[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const response = await api.get(`/v1/links/${link.uniq}/visits?limit=7${cursor ? `&cursor=${cursor}` : ''}`)
    t.equal(response.statusCode, 200)
    const body = response.json()
    t.ok(body.visits.length <= 7)
    seen.push(...body.visits)
    cursor = body.nextCursor
    // Visits arrive between pages: a newer one lands before the position and is not seen; one flushed late
    // with an older time lands behind it and is.
    if (pages++ === 0) {
      await storeVisits(database, [
        visit(link, '2026-03-10T11:00:00Z', 99, { destination: 'https://example.com/new' }),
        visit(link, '2026-03-10T10:00:05Z', 98, { destination: 'https://example.com/late' }),
      ])
    }
  } while (cursor)
  t.equal(pages, 4)
  const destinations = seen.map((v) => v.destination)
  t.same([...destinations].sort(), [...visits.map((v) => v.destination), 'https://example.com/late'].sort(), 'every visit once, no duplicate')
  const times = seen.map((v) => v.at)
  t.same(times, [...times].sort().reverse(), 'newest first')
  t.same(Object.keys(seen[0]).sort(), ['answer', 'at', 'bot', 'browser', 'country', 'destination', 'device', 'os', 'reason', 'referrerHost'], 'no visitor key')

  const window = (await api.get(`/v1/links/${link.uniq}/visits?${query({ from: '2026-03-10T10:00:01Z', to: '2026-03-10T10:00:02Z' })}`)).json()
  t.same(window.visits.map((v: Json) => v.at), Array(3).fill('2026-03-10T10:00:01.000Z'), 'from inclusive, to exclusive')
  t.equal(window.nextCursor, null)
  const first = (await api.get(`/v1/links/${link.uniq}/visits?limit=1`)).json()
  t.same(first.visits[0], { at: '2026-03-10T11:00:00.000Z', country: 'US', referrerHost: null, device: 'desktop', os: 'Windows', browser: 'Chrome', destination: 'https://example.com/new', reason: 'default', answer: 'redirect', bot: false })
  t.type(first.nextCursor, 'string')

  // A cursor pages the visits it was made for: another link's, or the same link's under other from/to, would
  // silently skip or repeat visits, so it is a 400 naming it.
  const other: Link = await api.link({ url: 'https://example.com/other-paged', id: 'other-paged' })
  await storeVisits(database, [visit(other, '2026-03-10T12:00:00Z', 1)])
  const foreign = await api.get(`/v1/links/${other.uniq}/visits?cursor=${first.nextCursor}`)
  t.equal(foreign.statusCode, 400)
  t.match(foreign.json(), { code: 'validation_failed', errors: [{ path: '/cursor' }] })
  const ranged = await api.get(`/v1/links/${link.uniq}/visits?${query({ from: '2026-03-10T00:00:00Z' })}&cursor=${first.nextCursor}`)
  t.equal(ranged.statusCode, 400)
  const decoded = JSON.parse(Buffer.from(first.nextCursor, 'base64url').toString())
  const negative = Buffer.from(JSON.stringify({ ...decoded, s: '-5' })).toString('base64url')
  t.equal((await api.get(`/v1/links/${link.uniq}/visits?cursor=${negative}`)).statusCode, 400, 'a position no visit has')
  t.equal((await api.get(`/v1/links/${link.uniq}/visits?cursor=${first.nextCursor}`)).statusCode, 200)
})

t.test("a link's visits at one instant whose numbers differ in length (9 and 10) page in numeric order", async (t) => {
  const link: Link = await api.link({ url: 'https://example.com/digits', id: 'digits' })
  // The next visits are numbered from just below a power of ten: ...98, ...99, then ...100, ...101.
  const [{ last }] = await prisma.$queryRawUnsafe<{ last: bigint }[]>(`SELECT last_value AS "last" FROM "analytics"."Visit_seq_seq"`)
  const ten = 10n ** BigInt(String(last).length + 1)
  await prisma.$executeRawUnsafe(`SELECT setval('"analytics"."Visit_seq_seq"', ${ten - 8n})`)
  const at = '2026-03-10T12:00:00Z'
  for (let batch = 0; batch < 3; batch++) {
    await storeVisits(database, Array.from({ length: 5 }, (_, i) => visit(link, at, 100 + batch * 5 + i, { destination: `https://example.com/d${batch * 5 + i}` })))
  }
  const seen: string[] = []
  let cursor: string | null = null
  do {
    const body: Json = (await api.get(`/v1/links/${link.uniq}/visits?limit=4${cursor ? `&cursor=${cursor}` : ''}`)).json()
    seen.push(...body.visits.map((v: Json) => v.destination))
    cursor = body.nextCursor
  } while (cursor)
  t.same(seen, Array.from({ length: 15 }, (_, i) => `https://example.com/d${14 - i}`), 'all 15, newest stored first, none skipped')
})

t.test("a link's visits older than VISIT_RETENTION_DAYS are not listed, though their month is not dropped yet", async (t) => {
  const link: Link = await api.link({ url: 'https://example.com/kept', id: 'kept' })
  const day = 86_400_000
  await storeVisits(database, [
    visit(link, new Date(Date.now() - 401 * day).toISOString(), 1, { destination: 'https://example.com/older' }),
    visit(link, new Date(Date.now() - 399 * day).toISOString(), 2, { destination: 'https://example.com/kept' }),
  ])
  // An instance with the default retention (400 days) on the same database: the stats' aggregates start at the
  // midnight before 400 days ago, and so does the list.
  const { app: defaults } = await buildTestApp(t, { database, env: { VISIT_RETENTION_DAYS: '400' } })
  const body: Json = (await apiClient(defaults, token).get(`/v1/links/${link.uniq}/visits`)).json()
  t.same(body.visits.map((v: Json) => v.destination), ['https://example.com/kept'])
})

t.test('the link record carries its all-time clicks (bots excluded)', async (t) => {
  const read = (await api.get(`/v1/links/${l1.uniq}`)).json()
  t.equal(read.clicks, 4)
  t.equal((await api.get(`/v1/links/by-domain/${domain}/one`)).json().clicks, 4)
  t.equal((await api.get(`/v1/links/${quiet.uniq}`)).json().clicks, 0)
  const list = (await api.get('/v1/links?limit=100')).json()
  const clicks = Object.fromEntries(list.links.map((l: Json) => [l.id, l.clicks]))
  t.match(clicks, { one: 4, two: 5, quiet: 0, paged: 27 })
  const updated = await api.put(`/v1/links/${l1.uniq}`, { link: { title: 'One' } })
  t.equal(updated.json().clicks, 4)
  const created = await api.post('/v1/links/create', { link: { url: 'https://example.com/new' }, autofill: false })
  t.equal(created.json().clicks, 0)
  t.equal((await other.api.get(`/v1/links/${foreign.uniq}`)).json().clicks, 2)
})

t.test('stats requests are not counted by the write quotas', async (t) => {
  const response = await api.get(`/v1/links/${l1.uniq}/stats?${query(MARCH)}`)
  t.notOk(Object.keys(response.headers).some((name) => name.startsWith('x-ratelimit')), 'no quota headers')
})
void workspaceId

t.test('time zones spelled in as many ways as a client likes hold a bounded number of formatters (some 30 KB each)', async (t) => {
  const spellings = Array.from({ length: 1200 }, (_, i) =>
    'America/Argentina/ComodRivadavia'.split('').map((char, j) => ((i >> (j % 11)) & 1 ? char.toUpperCase() : char)).join(''),
  )
  const distinct = [...new Set(spellings)].filter((spelling) => /^[A-Z][^/]*(\/[A-Z][^/]*)+$/.test(spelling))
  t.ok(distinct.length >= 250, `${distinct.length} spellings the answer keeps as given`)
  for (const timezone of distinct) {
    const response = await api.get(`/v1/links/${l2.uniq}/stats?${query({ ...MARCH, timezone, interval: 'month' })}`)
    if (response.statusCode !== 200) t.fail(`${timezone}: ${response.statusCode}`)
  }
  t.ok(zoneCacheSizes().formats <= 200, `${zoneCacheSizes().formats} formatters held`)
  t.ok(zoneCacheSizes().spellings <= 1000)
})
