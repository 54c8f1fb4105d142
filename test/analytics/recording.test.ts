/**
 * Recording visits (issue 11): what the redirect routes hand on is written, in batches, with the facts the
 * analytics need, no IP address, and unique visitors that follow the daily key; a full buffer drops and counts,
 * and the redirects keep answering.
 */
import t from 'tap'
import type { Visit } from '../../src/redirects/visits.js'
import { BufferedVisitRecorder, referrerHost } from '../../src/analytics/visit-recorder.js'
import { storeVisitRows } from '../../src/analytics/visit-store.js'
import { FALLBACK_RETRY_MS, SHARED_RECHECK_MS, VisitorKeys, visitorHash } from '../../src/analytics/visitor-key.js'
import { closeRedisClient, createRedisClient, firstConnection } from '../../src/redis/redis-client.js'
import { TcpProxy } from '../support/tcp-proxy.js'
import { waitFor } from '../support/polling.js'
import { userAgentFacts } from '../../src/analytics/user-agent.js'
import { buildTestApp } from '../support/test-app.js'
import { acmeWorkspace, ANDROID_PHONE, DESKTOP, FACEBOOK_CRAWLER, IPHONE, visit } from '../redirects/visit-support.js'

const DAY_1 = Date.UTC(2031, 2, 1, 10, 30)
const DAY_2 = Date.UTC(2031, 2, 2, 9, 15)
let clock = DAY_1
let draw = 0.5
const first = await buildTestApp(t, {
  redirects: { now: () => clock, random: () => draw },
  visits: { buffer: { flushEveryMs: 60_000 } },
})
const { app, prisma } = first
const { link } = await acmeWorkspace(first)
const plain = await link({ id: 'plain', url: 'https://example.com/plain' })
const ruled = await link({
  id: 'ruled',
  url: 'https://example.com/default',
  extraOptionsGeolocations: [{ value: 'DE', url: 'https://example.com/de' }],
  extraOptionsLinkRotator: [{ url: 'https://example.com/rotated', value: 50 }],
})
await link({ id: 'masked', url: 'https://example.com/masked', masking: true })
await link({ id: 'pixel', url: 'https://example.com/pixel', pixels: [{ platform: 'facebook', value: '1' }] })

const recorder = app.visitRecorder!
/** Visits are handed to the recorder in the turn after their answer; then the buffer is written. */
const written = async () => {
  await new Promise((resolve) => setImmediate(resolve))
  await recorder.flush()
}
/**
 * The aggregates are summed from the raw visits by the rollup (every minute, up to a few seconds ago): here up to
 * past the test's clock. Visits written after that are late, and their batch sums them itself.
 */
const rolledUp = () => app.visitRollup.run(new Date(Date.UTC(2032, 0, 1)))
const stored = (uniq: number) =>
  prisma.$queryRawUnsafe<Record<string, unknown>[]>(
    `SELECT "answer", "destination", "reason", "country", "referrerHost", "device", "os", "browser", "bot", "domain",
       "visitor"::text AS "visitor", "firstOfDay", "at"
     FROM "analytics"."Visit" WHERE "linkUniq" = $1 ORDER BY "at", "destination"`,
    uniq,
  )

t.test('every kind of visit is recorded with what the analytics need', async (t) => {
  const address = '198.51.100.77'
  const as = (userAgent: string, headers: Record<string, string> = {}) => ({
    headers: { 'user-agent': userAgent, ...headers },
    remoteAddress: address,
  })
  t.equal((await visit(app, '/plain?utm=1', as(IPHONE, { 'cf-ipcountry': 'nl', referer: 'https://News.Example/a?b' }))).statusCode, 302)
  t.equal((await visit(app, '/plain', as(FACEBOOK_CRAWLER))).statusCode, 200, 'a crawler preview')
  t.equal((await visit(app, '/plain', { ...as(DESKTOP), method: 'HEAD' })).statusCode, 302, 'HEAD: not a visit')
  t.equal((await visit(app, '/masked', as(ANDROID_PHONE))).statusCode, 200)
  t.equal((await visit(app, '/pixel', as(DESKTOP))).statusCode, 200)
  t.equal((await visit(app, '/missing', as(DESKTOP))).statusCode, 404, 'no link: not a visit')
  await written()

  const rows = await stored(plain.uniq)
  t.equal(rows.length, 2, 'the redirect and the preview; not HEAD')
  const byAnswer = (answer: string) => rows.find((row) => row.answer === answer)
  t.match(byAnswer('redirect'), {
    answer: 'redirect',
    destination: 'https://example.com/plain', // the url chosen; the visitor was sent on with ?utm=1
    reason: 'default',
    country: 'NL',
    referrerHost: 'news.example',
    device: 'mobile',
    os: 'iOS',
    browser: 'Safari',
    bot: false,
    domain: 'go.acme.test',
    firstOfDay: true,
  })
  t.match(byAnswer('crawler'), { answer: 'crawler', destination: 'https://example.com/plain', bot: true, device: 'bot', referrerHost: null, country: null, firstOfDay: false })
  const [masked] = await prisma.$queryRawUnsafe<Record<string, unknown>[]>(
    `SELECT "answer", "device", "os" FROM "analytics"."Visit" WHERE "answer" IN ('masking', 'interstitial') ORDER BY "answer"`,
  )
  t.match(masked, { answer: 'interstitial' })

  const [{ leaks }] = await prisma.$queryRawUnsafe<{ leaks: number }[]>(
    `SELECT count(*)::int AS "leaks" FROM "analytics"."Visit" v WHERE row_to_json(v)::text LIKE $1`,
    `%${address}%`,
  )
  t.equal(leaks, 0, 'no IP address in any column')
  t.match(await rolledUp(), { visits: 4 }, 'the rollup sums the four visits (the preview too)')
  t.same(
    await prisma.$queryRawUnsafe(`SELECT "clicks"::int AS "clicks" FROM "analytics"."LinkClicks" WHERE "linkUniq" = $1`, plain.uniq),
    [{ clicks: 1 }],
    'all-time clicks exclude the preview',
  )
  const totals = await prisma.$queryRawUnsafe<{ clicks: number; bots: number }[]>(
    `SELECT sum("clicks")::int AS "clicks", sum("bots")::int AS "bots" FROM "analytics"."LinkHourly" WHERE "linkUniq" = $1 AND "dimension" = 'total'`,
    plain.uniq,
  )
  t.same(totals, [{ clicks: 1, bots: 1 }])
})

t.test('the chosen destination and why: default, geolocation rule, rotator entry', async (t) => {
  // Each visit brings a click id of its own: counted by the visit's full address, every visit would be a
  // destination of its own (and a row of its own in each aggregate).
  draw = 0.9 // past the rotator's 50%: the link's own url
  t.match((await visit(app, '/ruled?gclid=a1', { headers: { 'cf-ipcountry': 'FR' } })).headers.location, /gclid=a1$/)
  await visit(app, '/ruled?gclid=b2', { headers: { 'cf-ipcountry': 'DE' } })
  draw = 0.1
  await visit(app, '/ruled?gclid=c3', { headers: { 'cf-ipcountry': 'FR' } })
  await written()
  const rows = await stored(ruled.uniq)
  t.same(
    rows.map((row) => [row.destination, row.reason]).sort(),
    [
      ['https://example.com/de', 'geolocation'],
      ['https://example.com/default', 'default'],
      ['https://example.com/rotated', 'rotator'],
    ],
  )
  draw = 0.5
})

t.test('unique visitors: one per user agent and address a day, under a key that changes every day', async (t) => {
  const unique = await link({ id: 'unique', url: 'https://example.com/unique' })
  const from = (userAgent: string) => ({ headers: { 'user-agent': userAgent }, remoteAddress: '203.0.113.5' })
  clock = DAY_1
  await visit(app, '/unique', from(DESKTOP))
  // The same IPv4 client as a listener on "::" sees it: the same visitor.
  await visit(app, '/unique', { ...from(DESKTOP), remoteAddress: '::ffff:203.0.113.5' })
  await visit(app, '/unique', from(IPHONE))
  await written()
  await visit(app, '/unique', from(DESKTOP)) // a later batch: still not the first of the day
  await written()
  clock = DAY_2
  await visit(app, '/unique', from(DESKTOP))
  await written()
  clock = DAY_1
  await rolledUp()

  const days = await prisma.$queryRawUnsafe<{ day: string; clicks: number; visitors: number }[]>(
    `SELECT to_char("hour", 'YYYY-MM-DD') AS "day", sum("clicks")::int AS "clicks", sum("visitors")::int AS "visitors"
     FROM "analytics"."LinkHourly" WHERE "linkUniq" = $1 AND "dimension" = 'total' GROUP BY 1 ORDER BY 1`,
    unique.uniq,
  )
  t.same(days, [
    { day: '2031-03-01', clicks: 4, visitors: 2 },
    { day: '2031-03-02', clicks: 1, visitors: 1 },
  ])
  const rows = await stored(unique.uniq)
  const desktop = rows.filter((row) => row.browser === 'Chrome')
  t.equal(new Set(desktop.slice(0, 3).map((row) => row.visitor)).size, 1, 'the same visitor all day')
  t.not(desktop[3].visitor, desktop[0].visitor, 'and another key the next day')
})

t.test('a full buffer drops visits and counts them, and says so once a minute; the redirects keep answering', async (t) => {
  const warnings: { msg: string; dropped?: number }[] = []
  const small = await buildTestApp(t, {
    database: first.database,
    visits: { buffer: { maxBuffered: 10, flushEveryMs: 60_000 } },
    logger: { level: 'warn', stream: { write: (line: string) => void warnings.push(JSON.parse(line)) } },
  })
  await small.app.redirects.domains.refresh()
  const before = small.app.visitRecorder!.stats()
  const statuses = []
  for (let i = 0; i < 25; i++) statuses.push((await visit(small.app, '/plain')).statusCode)
  await new Promise((resolve) => setImmediate(resolve))
  t.same(new Set(statuses), new Set([302]), 'every visitor was redirected')
  const stats = small.app.visitRecorder!.stats()
  t.equal(stats.recorded - before.recorded, 10)
  t.equal(stats.dropped - before.dropped, 15)
  t.equal(stats.buffered, 10)
  const dropLines = warnings.filter((line) => /dropped/.test(line.msg))
  t.equal(dropLines.length, 1, 'one warning, at the first drop; the rest counted')
  t.match(dropLines[0], { msg: /the buffer is full.*visits are dropped/, dropped: 1 })
  await small.app.visitRecorder!.flush()
  t.equal(small.app.visitRecorder!.stats().stored - before.stored, 10, 'what was kept is written')
})

t.test('a batch the database refuses is kept and written at the next try', async (t) => {
  let refuse = true
  const written: number[] = []
  const warnings: string[] = []
  const log = { warn: (_: unknown, msg: string) => warnings.push(msg), info: () => {}, error: () => {} } as never
  const buffered = new BufferedVisitRecorder(
    async (batch) => {
      if (refuse) throw new Error('database down')
      written.push(...batch.map((visit) => visit.linkUniq))
    },
    new VisitorKeys(),
    log,
    { batchSize: 2 },
  )
  const sample = (link: number): Visit => ({
    link, workspaceId: 1, domain: 'd', answer: 'redirect', destination: 'https://e/', reason: 'default', at: DAY_1,
    country: null, userAgent: DESKTOP, referrer: undefined, address: '192.0.2.1',
  })
  for (const uniq of [1, 2, 3]) buffered.record(sample(uniq))
  await buffered.flush()
  t.match(buffered.stats(), { stored: 0, failedBatches: 1, buffered: 3 })
  await buffered.flush()
  t.equal(warnings.length, 1, 'one warning while it keeps failing')
  refuse = false
  await buffered.flush()
  t.same(written, [1, 2, 3], 'in order, none lost, none twice')
  t.match(buffered.stats(), { stored: 3, buffered: 0 })
})

t.test("the buffer is bounded by its bytes too: clients' long headers are cut to what is stored, and visits past the bytes dropped", async (t) => {
  const rows: { referrerHost: string | null; browser: string | null }[] = []
  const log = { warn: () => {}, info: () => {}, error: () => {} } as never
  const buffered = new BufferedVisitRecorder(async (batch) => void rows.push(...batch), new VisitorKeys(), log, { maxBufferedBytes: 200_000 })
  const heavy = (i: number): Visit => ({
    link: 1, workspaceId: 1, domain: 'd', answer: 'redirect', destination: 'https://e/', reason: 'default', at: DAY_1,
    country: null, userAgent: `${DESKTOP} ${'x'.repeat(8000)}${i}`, referrer: `https://News.Example/${'y'.repeat(7800)}`, address: '192.0.2.1',
  })
  for (let i = 0; i < 200; i++) buffered.record(heavy(i))
  // Each held as a User-Agent of 2,048 characters and a referrer's origin: some 2.5 KB, so about 80 fit in 200 KB.
  const { recorded, dropped } = buffered.stats()
  t.ok(recorded >= 70 && recorded <= 85, `${recorded} held`)
  t.equal(recorded + dropped, 200, 'the rest dropped, and counted')
  await buffered.flush()
  t.equal(rows.length, recorded)
  t.match(rows[0], { referrerHost: 'news.example', browser: 'Chrome' }, 'what is stored of them is unchanged')
  for (let i = 0; i < 50; i++) buffered.record(heavy(i))
  t.equal(buffered.stats().recorded, recorded + 50, 'the bytes written are free again')
})

t.test('a batch whose COMMIT went through but whose answer was lost is tried again, and stored once', async (t) => {
  // A connection cut right after COMMIT: PostgreSQL has the visits, the recorder learns only of an error.
  let loseAnswer = true
  const log = { warn: () => {}, info: () => {}, error: () => {} } as never
  const recorder = new BufferedVisitRecorder(
    async (rows, batchId) => {
      await storeVisitRows(first.database, rows, batchId)
      if (loseAnswer) {
        loseAnswer = false
        throw new Error('Connection terminated unexpectedly')
      }
    },
    new VisitorKeys(),
    log,
  )
  const marked = (n: number): Visit => ({
    link: plain.uniq, workspaceId: plain.workspaceId, domain: 'go.acme.test', answer: 'redirect', destination: 'https://e/lost-answer',
    reason: 'default', at: DAY_1 + n, country: null, userAgent: DESKTOP, referrer: undefined, address: `192.0.2.${n}`,
  })
  for (let n = 0; n < 10; n++) recorder.record(marked(n))
  await recorder.flush()
  t.match(recorder.stats(), { stored: 0, failedBatches: 1, buffered: 10 })
  // Visits recorded meanwhile are not part of the batch tried again: they go in a batch of their own.
  for (let n = 10; n < 15; n++) recorder.record(marked(n))
  await recorder.flush()
  t.match(recorder.stats(), { stored: 15, buffered: 0 })
  const [{ count }] = await prisma.$queryRawUnsafe<{ count: number }[]>(
    `SELECT count(*)::int AS "count" FROM "analytics"."Visit" WHERE "destination" = 'https://e/lost-answer'`,
  )
  t.equal(count, 15, 'each visit stored once')
})

t.test("a visit without a User-Agent is sent on, and recorded as a bot's (no browser leaves it out)", async (t) => {
  const bare = await link({ id: 'no-agent', url: 'https://example.com/no-agent' })
  const response = await visit(app, '/no-agent', { headers: { 'user-agent': '' }, remoteAddress: '198.51.100.78' })
  t.equal(response.statusCode, 302, 'a plain redirect, not the preview page')
  t.equal(response.headers.location, 'https://example.com/no-agent')
  await written()
  t.match(await stored(bare.uniq), [{ answer: 'redirect', bot: true, device: 'bot', os: null, browser: null, firstOfDay: false }])
})

t.test('the pieces: referrer hosts, user agents, the visitor hash', async (t) => {
  t.equal(referrerHost(undefined), null)
  t.equal(referrerHost('not a url'), null)
  t.equal(referrerHost('android-app://com.google.android.gm/'), 'com.google.android.gm')
  t.equal(referrerHost('https://WWW.Example.com:8443/x'), 'www.example.com')
  t.match(userAgentFacts(DESKTOP), { device: 'desktop', os: 'Windows', browser: 'Chrome', bot: false })
  t.match(userAgentFacts(ANDROID_PHONE), { device: 'mobile', os: 'Android', bot: false })
  t.match(userAgentFacts('curl/8.4.0'), { device: 'bot', bot: true })
  t.match(userAgentFacts(undefined), { device: 'bot', os: null, browser: null, bot: true }, 'no User-Agent: a program, not a person')
  t.match(userAgentFacts(''), { device: 'bot', bot: true })
  const key = Buffer.alloc(32, 1)
  t.match(visitorHash(key, '192.0.2.1', DESKTOP), /^-?\d{1,19}$/)
  t.equal(visitorHash(key, '192.0.2.1', DESKTOP), visitorHash(key, '192.0.2.1', DESKTOP))
  t.not(visitorHash(key, '192.0.2.1', DESKTOP), visitorHash(key, '192.0.2.2', DESKTOP))
  t.not(visitorHash(key, '192.0.2.1', DESKTOP), visitorHash(Buffer.alloc(32, 2), '192.0.2.1', DESKTOP))
})

t.test('with Redis, instances share the day\'s key; it expires within two days', { skip: !process.env.REDIS_URL && 'needs REDIS_URL' }, async (t) => {
  const { Redis } = await import('ioredis')
  const redis = new Redis(process.env.REDIS_URL!)
  t.teardown(() => redis.quit())
  const keyPrefix = `test-${process.pid}-${Date.now()}:`
  const one = await new VisitorKeys({ redis, keyPrefix }).keyOf('2031-03-01')
  const two = await new VisitorKeys({ redis, keyPrefix }).keyOf('2031-03-01')
  t.same(one, two)
  t.not((await new VisitorKeys({ redis, keyPrefix }).keyOf('2031-03-02')).toString('hex'), one.toString('hex'))
  const ttl = await redis.ttl(`${keyPrefix}analytics:visitor-key:2031-03-01`)
  t.ok(ttl > 0 && ttl <= 2 * 86_400, `expires in ${ttl} s`)
})

t.test('a day key Redis lost (restarted empty, evicted) is put back, so instances keep sharing one', { skip: !process.env.REDIS_URL && 'needs REDIS_URL' }, async (t) => {
  const { Redis } = await import('ioredis')
  const redis = new Redis(process.env.REDIS_URL!)
  t.teardown(() => redis.quit())
  const keyPrefix = `test-${process.pid}-${Date.now()}-lost:`
  const day = '2031-03-01'
  const name = `${keyPrefix}analytics:visitor-key:${day}`
  let clock = 0
  const running = new VisitorKeys({ redis, keyPrefix, now: () => clock })
  const first = (await running.keyOf(day)).toString('hex')

  // Lost, then a running instance checks first: it puts its key back, and an instance started later takes it.
  await redis.del(name)
  clock += SHARED_RECHECK_MS
  t.equal((await running.keyOf(day)).toString('hex'), first, 'the running instance keeps its key')
  t.equal((await new VisitorKeys({ redis, keyPrefix }).keyOf(day)).toString('hex'), first, 'and a new instance gets that key')

  // Lost, then an instance started meanwhile makes a key first: the running one keeps the key it hashed the day's
  // visitors with (switching would count each of them again).
  await redis.del(name)
  const started = (await new VisitorKeys({ redis, keyPrefix }).keyOf(day)).toString('hex')
  t.not(started, first, 'the new instance made a new key')
  clock += SHARED_RECHECK_MS
  t.equal((await running.keyOf(day)).toString('hex'), first, 'the running instance keeps its own')
})

t.test("while Redis cannot be reached an instance uses a key of its own, and Redis's again once it is back", { skip: !process.env.REDIS_URL && 'needs REDIS_URL' }, async (t) => {
  const { Redis } = await import('ioredis')
  const direct = new Redis(process.env.REDIS_URL!)
  t.teardown(() => direct.quit())
  const { proxy, url } = await TcpProxy.inFrontOf(process.env.REDIS_URL!)
  t.teardown(() => proxy.close())
  const redis = createRedisClient(url)
  t.teardown(() => closeRedisClient(redis))
  await firstConnection(redis)
  const keyPrefix = `test-${process.pid}-${Date.now()}:`
  const day = '2031-03-01'
  // Another instance's: the day's shared key.
  const shared = (await new VisitorKeys({ redis: direct, keyPrefix }).keyOf(day)).toString('hex')

  proxy.refuse()
  let clock = 0
  const keys = new VisitorKeys({ redis, keyPrefix, now: () => clock })
  const own = (await keys.keyOf(day)).toString('hex')
  t.not(own, shared, "this process's own key while Redis cannot be reached")
  proxy.restore()
  t.ok(await waitFor(() => redis.status === 'ready'), 'the client reconnects')
  clock += FALLBACK_RETRY_MS - 1
  t.equal((await keys.keyOf(day)).toString('hex'), own, 'the same own key until it asks again (its visitors count once on it)')
  clock += 1
  t.equal((await keys.keyOf(day)).toString('hex'), shared, "Redis's key once Redis answers again, for the rest of the day")
})
