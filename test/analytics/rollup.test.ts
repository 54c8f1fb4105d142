/**
 * The rollup (src/analytics/visit-rollup.ts): batches write raw visits only, and the rollup sums them into the
 * hourly aggregates. Stats and the links' clicks must not depend on where the visits are: all raw, split at
 * "rolledUpTo", or all summed give the same answers; a visit whose time was rolled up before its batch arrived
 * is summed by its batch; a rollup racing batches counts every visit exactly once.
 */
import t from 'tap'
import { storeVisits } from '../../src/analytics/visit-store.js'
import { rollUpVisits } from '../../src/analytics/visit-rollup.js'
import { acmeAnalytics, BOT } from './stored-visit.js'

const { app, prisma, database, api, visit, setRolledUpTo } = await acmeAnalytics(t)
type Link = { uniq: number; domain: string }
const bot = BOT

const rolledUpTo = async () =>
  (await prisma.$queryRawUnsafe<{ at: Date }[]>(`SELECT "rolledUpTo" AS "at" FROM "analytics"."Rollup"`))[0].at.toISOString()
const aggregated = async () =>
  (
    await prisma.$queryRawUnsafe<{ clicks: number | null; bots: number | null }[]>(
      `SELECT sum("clicks")::int AS "clicks", sum("bots")::int AS "bots" FROM "analytics"."LinkHourly" WHERE "dimension" = 'total'`,
    )
  )[0]

t.test('stats and clicks are the same whether the visits are raw, split at rolledUpTo, or summed', async (t) => {
  const one: Link = await api.link({ url: 'https://example.com/a', id: 'one', tags: ['promo'] })
  const two: Link = await api.link({ url: 'https://example.com/b', id: 'two' })
  // Nothing summed yet: every visit below stays raw until the rollup.
  await setRolledUpTo('2030-01-01T00:00:00Z')
  await storeVisits(database, [
    visit(one, '2030-01-05T10:15:00Z', 1),
    visit(one, '2030-01-05T10:45:00Z', 1, { country: 'DE', referrerHost: null }),
    visit(one, '2030-01-05T11:05:00Z', 2, { device: 'mobile', os: 'iOS', browser: 'Safari', destination: 'https://example.com/rotated', reason: 'rotator' }),
    visit(one, '2030-01-05T11:10:00Z', 3, bot),
    visit(one, '2030-01-06T09:00:00Z', 1, { country: null }),
    visit(two, '2030-01-05T10:20:00Z', 1),
    visit(two, '2030-01-06T23:59:59Z', 4, { browser: 'Firefox', os: 'Linux' }),
  ])
  const range = 'from=2030-01-05T00:00:00Z&to=2030-01-08T00:00:00Z'
  const read = async () => ({
    one: (await api.get(`/v1/links/${one.uniq}/stats?${range}&interval=hour&timezone=Asia/Kolkata`)).json(),
    byDomain: (await api.get(`/v1/links/by-domain/${one.domain}/one/stats?${range}`)).json(),
    workspace: (await api.get(`/v1/stats?${range}`)).json(),
    tagged: (await api.get(`/v1/stats?${range}&tag=promo`)).json(),
    domain: (await api.get(`/v1/stats?${range}&domain=go.acme.test&interval=day`)).json(),
    clicks: (await api.get('/v1/links?limit=10')).json().links.map((link: { uniq: number; clicks: number }) => [link.uniq, link.clicks]).sort(),
    // Every answer that carries a record counts them: a read, a read by slug, a plain update (one UPDATE … RETURNING)
    // and an update of pixels (a transaction, its clicks read after it).
    records: [
      (await api.get(`/v1/links/${one.uniq}`)).json().clicks,
      (await api.get(`/v1/links/by-domain/${one.domain}/ONE`)).json().clicks,
      (await api.put(`/v1/links/${one.uniq}`, { link: { note: 'read again' } })).json().clicks,
      (await api.put(`/v1/links/${two.uniq}`, { link: { pixels: [{ platform: 'ga', value: 'G-ROLLUP' }] } })).json().clicks,
    ],
  })

  const raw = await read()
  t.same(raw.one.totals, { clicks: 4, visitors: 3, bots: 1 }, 'counted from the raw visits: visitors 1 and 2 on the 5th, 1 again on the 6th')
  t.same(raw.workspace.totals, { clicks: 6, visitors: 4, bots: 1 })
  t.same(raw.tagged.totals, { clicks: 4, visitors: 3, bots: 1 })
  t.same(
    raw.workspace.top.links.map((link: { slug: string; visitors: number }) => [link.slug, link.visitors]),
    [['one', 3], ['two', 2]],
    "top links count each link's own visitors (visitor 1 is new to two on the 5th, though one saw them first)",
  )
  t.same(raw.clicks, [[one.uniq, 4], [two.uniq, 2]].sort(), 'clicks on the link records')
  t.same(raw.records, [4, 4, 4, 2], 'and on the records of a read, a read by slug and both kinds of update')
  t.same(await aggregated(), { clicks: null, bots: null }, 'nothing summed yet')

  t.match(await app.visitRollup.run(new Date('2030-01-05T11:07:00Z')), { visits: 4 }, 'a rollup up to 11:07 sums the four visits before it')
  t.equal(await rolledUpTo(), '2030-01-05T11:07:00.000Z')
  t.same(await read(), raw, 'split in the middle of an hour: the same answers')

  t.match(await app.visitRollup.run(new Date('2030-02-01T00:00:00Z')), { visits: 3 })
  t.same(await aggregated(), { clicks: 6, bots: 1 })
  t.same(await read(), raw, 'all summed: the same answers')
  t.match(await app.visitRollup.run(new Date('2030-02-01T00:00:00Z')), { visits: 0, rolledUpTo: null }, 'nothing is due twice')
})

t.test('a visit whose time was already rolled up is summed by its own batch, once', async (t) => {
  const late: Link = await api.link({ url: 'https://example.com/late', id: 'late' })
  const before = await aggregated()
  await storeVisits(database, [visit(late, '2030-01-20T08:00:00Z', 7), visit(late, '2030-01-20T08:30:00Z', 8, bot)])
  t.same(await aggregated(), { clicks: before.clicks! + 1, bots: before.bots! + 1 }, 'summed by the batch')
  t.match(await app.visitRollup.run(new Date('2030-03-01T00:00:00Z')), { visits: 0 }, 'and not again by the rollup')
  const stats = (await api.get(`/v1/links/${late.uniq}/stats?from=2030-01-20T00:00:00Z&to=2030-01-21T00:00:00Z`)).json()
  t.same(stats.totals, { clicks: 1, visitors: 1, bots: 1 })
})

/** The database, counting the transactions the rollup runs (one per step). */
function countingSteps() {
  const steps: string[] = []
  const counting = {
    ...database,
    transaction: <T>(work: Parameters<typeof database.transaction<T>>[0]) => {
      steps.push('step')
      return database.transaction(work)
    },
  }
  return { steps, counting }
}

t.test('a clock that jumped: the rollup steps over the empty stretch', async (t) => {
  const far: Link = await api.link({ url: 'https://example.com/far', id: 'far' })
  await storeVisits(database, [visit(far, '2031-06-01T12:00:00Z', 9)])
  const { steps, counting } = countingSteps()
  const result = await rollUpVisits(counting, new Date('2031-06-02T00:00:00Z'))
  t.same(result, { visits: 1, rolledUpTo: new Date('2031-06-02T00:00:00Z') })
  t.ok(steps.length <= 3, `a year and a half in ${steps.length} steps, not one per hour`)
})

t.test('rollups racing batches count every visit exactly once', async (t) => {
  const busy: Link = await api.link({ url: 'https://example.com/busy', id: 'busy' })
  const start = Date.parse(await rolledUpTo())
  let stored = 0
  for (let round = 0; round < 15; round++) {
    // Each batch's visits straddle the point the concurrent rollup goes up to.
    const at = (second: number) => new Date(start + round * 10_000 + second * 1000).toISOString()
    const batch = [visit(busy, at(1), round), visit(busy, at(5), round), visit(busy, at(9), round, bot)]
    stored += 2
    await Promise.all([storeVisits(database, batch), rollUpVisits(database, new Date(start + round * 10_000 + 5_000))])
  }
  await rollUpVisits(database, new Date(start + 200_000))
  const [summed] = await prisma.$queryRawUnsafe<{ clicks: number; bots: number }[]>(
    `SELECT sum("clicks")::int AS "clicks", sum("bots")::int AS "bots" FROM "analytics"."LinkHourly" WHERE "linkUniq" = $1 AND "dimension" = 'total'`,
    busy.uniq,
  )
  t.same(summed, { clicks: stored, bots: 15 })
  const [clicks] = await prisma.$queryRawUnsafe<{ clicks: number }[]>(`SELECT "clicks"::int AS "clicks" FROM "analytics"."LinkClicks" WHERE "linkUniq" = $1`, busy.uniq)
  t.equal(clicks.clicks, stored)
})

t.test('values too long for an aggregate key are cut to 1,024 bytes, whole characters: the rollup goes on', async (t) => {
  // Each of these is over the 2,704 bytes of a btree entry: one such visit used to fail the rollup of every
  // workspace, minute after minute. A CJK destination (3 bytes a character), a Referer's host of 3,000 letters
  // (URL parsing sets no length), an unknown browser's name read from Latin-1 header bytes (2 bytes each).
  // Characters drawn at random (seeded), as a repeated one would be compressed into the index entry and fit.
  let seed = 7
  const draw = (from: number, count: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31
    return String.fromCharCode(from + (seed % count))
  }
  const text = (length: number, from: number, count: number) => Array.from({ length }, () => draw(from, count)).join('')
  const destination = `https://example.com/${text(1100, 0x4e00, 0x5000)}`
  const referrerHost = `${text(3000, 0x61, 26)}.example`
  const browser = text(2040, 0xc0, 0x40)
  const long: Link = await api.link({ url: destination, id: 'long-values' })
  await setRolledUpTo('2033-01-01T00:00:00Z')
  await storeVisits(database, [
    visit(long, '2033-01-01T10:00:00Z', 1, { destination, referrerHost, browser }),
    visit(long, '2033-01-01T10:05:00Z', 2, { destination, referrerHost, browser }),
  ])
  const read = async () => (await api.get(`/v1/links/${long.uniq}/stats?from=2033-01-01T00:00:00Z&to=2033-01-02T00:00:00Z`)).json()
  const raw = await read()
  t.match(await app.visitRollup.run(new Date('2033-01-02T00:00:00Z')), { visits: 2 }, 'the rollup sums them')
  t.equal(await rolledUpTo(), '2033-01-02T00:00:00.000Z', 'and moves on')
  const summed = await read()
  t.same(summed, raw, 'the same answers from the aggregates as from the raw visits')
  // The top list's entry of a value: the one that starts it and is longer than any other value there.
  const cut = (value: string) =>
    Object.values(summed.top as Record<string, { value: string | null }[]>).flat().find((item) => item.value !== null && item.value.length > 100 && value.startsWith(item.value))
  t.match(cut(destination), { value: destination.slice(0, 341), clicks: 2 }, 'the destination: a third of 1,024 characters, 20 + 321 × 3 = 983 bytes')
  t.match(cut(referrerHost), { value: referrerHost.slice(0, 1024), clicks: 2 }, 'the referrer host: its first 1,024 letters')
  t.match(cut(browser), { value: browser.slice(0, 512), clicks: 2 }, 'the browser: half of 1,024 characters, 2 bytes each')
  const [stored] = await prisma.$queryRawUnsafe<{ destination: string }[]>(
    `SELECT "destination" FROM "analytics"."Visit" WHERE "linkUniq" = $1 LIMIT 1`, long.uniq)
  t.equal(stored.destination, destination, 'the raw visit keeps the whole destination (the export shows it)')
})

t.test('raw visits go through COPY as they were: tabs, newlines, backslashes and \\N in their text, NULLs, a shared millisecond', async (t) => {
  const link: Link = await api.link({ url: 'https://example.com/copy', id: 'copy' })
  const odd = 'https://example.com/a\tb\nc\\d\re?\\N'
  await storeVisits(database, [
    visit(link, '2026-06-01T10:00:00.123Z', 1, { destination: odd, referrerHost: 'x\\y', os: '\\N', browser: null, country: null }),
    visit(link, '2026-06-01T10:00:00.123Z', 2, { reason: 'rotator', ...bot }),
    visit(link, '2026-06-01T10:00:00.124Z', 3),
  ])
  const rows = await prisma.$queryRawUnsafe<Record<string, unknown>[]>(
    `SELECT "at", "destination", "referrerHost", "os", "browser", "country", "reason", "answer", "bot", "visitor"::text AS "visitor", "firstOfDay"
     FROM "analytics"."Visit" WHERE "linkUniq" = $1 ORDER BY "seq"`,
    link.uniq,
  )
  t.same(rows.map((row) => (row.at as Date).toISOString()), ['2026-06-01T10:00:00.123Z', '2026-06-01T10:00:00.123Z', '2026-06-01T10:00:00.124Z'])
  t.same(rows[0], { ...rows[0], destination: odd, referrerHost: 'x\\y', os: '\\N', browser: null, country: null, visitor: '1', firstOfDay: true })
  t.match(rows[1], { reason: 'rotator', answer: 'crawler', bot: true, os: null, firstOfDay: false })
  t.match(rows[2], { destination: 'https://example.com/a', visitor: '3', bot: false })
})

t.test('a backlog is summed in steps of about maxVisits visits, each its own transaction; a busy span stays due', async (t) => {
  const backlog: Link = await api.link({ url: 'https://example.com/backlog', id: 'backlog' })
  const start = Date.parse(await rolledUpTo())
  // 10 visits 1 ms apart, two of them at the same instant.
  const times = [1, 2, 3, 3, 4, 5, 6, 7, 8, 9].map((ms) => new Date(start + 60_000 + ms).toISOString())
  await storeVisits(database, times.map((at, i) => visit(backlog, at, 100 + i)))
  const { steps, counting } = countingSteps()
  // minSpanMs as the timer's: the 10 visits fall within far less, yet the span up to upTo is due.
  const result = await rollUpVisits(counting, new Date(start + 120_000), { maxVisits: 3, minSpanMs: 30_000 })
  t.equal(result.visits, 10, 'every visit summed')
  t.same(result.rolledUpTo, new Date(start + 120_000))
  t.ok(steps.length >= 3 && steps.length <= 6, `in ${steps.length} steps of about 3 visits (those at the instant a step starts from, more)`)
  const [summed] = await prisma.$queryRawUnsafe<{ clicks: number }[]>(
    `SELECT sum("clicks")::int AS "clicks" FROM "analytics"."LinkHourly" WHERE "linkUniq" = $1 AND "dimension" = 'total'`,
    backlog.uniq,
  )
  t.equal(summed.clicks, 10, 'each counted once')
})
