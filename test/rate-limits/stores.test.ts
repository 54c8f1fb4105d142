/**
 * The two quota stores side by side, without HTTP: they answer alike on long random runs of reservations,
 * refunds and peeks; a refund gives back only what still counts, and once; a window counts exactly its
 * length; and the Redis key carries the workspace hash tag, expires, and holds only the last day's requests.
 */
import t from 'tap'
import { MemoryQuotaStore } from '../../src/rate-limits/memory-store.js'
import { LateReservation, type QuotaDecision, type QuotaLimits, type QuotaStore, type QuotaSubject, type QuotaTaken } from '../../src/rate-limits/quota-store.js'
import { RedisQuotaStore } from '../../src/rate-limits/redis-store.js'
import type { Redis } from 'ioredis'
import { createRedisClient, firstConnection } from '../../src/redis/redis-client.js'
import { REDIS_URL, redisKeyPrefix, T0 } from './quota-support.js'

const stores: { name: string; store: QuotaStore }[] = [{ name: 'in-process', store: new MemoryQuotaStore() }]
let redisStore: RedisQuotaStore | undefined
if (REDIS_URL) {
  const redis = createRedisClient(REDIS_URL)
  await firstConnection(redis)
  redisStore = new RedisQuotaStore(redis, { keyPrefix: redisKeyPrefix(t), ownsClient: true, callersClock: true })
  stores.push({ name: 'redis', store: redisStore })
}
t.teardown(() => Promise.all(stores.map(({ store }) => store.close())))

let subjects = 0
const newSubject = (): QuotaSubject => ({ workspaceId: 1000 + ++subjects, operation: subjects % 2 ? 'create' : 'update' })

for (const { name, store } of stores) {
  t.test(`${name}: a window counts a request for exactly its length, to the millisecond`, async (t) => {
    const subject = newSubject()
    const limits = { hour: 1, day: 2 }
    t.ok((await store.reserve(subject, limits, T0)).allowed)
    const full = await store.reserve(subject, limits, T0 + 3_599_999)
    t.notOk(full.allowed, 'one millisecond short of an hour: still counted')
    t.equal(full.windows[0].resetSeconds, 1, 'and a slot frees in a second')
    const freed = await store.reserve(subject, limits, T0 + 3_600_000)
    t.ok(freed.allowed, 'an hour later: no longer counted')
    const dayFull = await store.reserve(subject, limits, T0 + 7_300_000)
    t.notOk(dayFull.allowed, 'the day still counts both')
    t.equal(dayFull.windows[1].resetSeconds, 86_400 - 7_300, 'until the first is a day old: never more than the window')
    t.ok((await store.reserve(subject, limits, T0 + 86_400_000)).allowed, 'a day later: the first no longer counts')
  })

  t.test(`${name}: a refund gives back only what still counts, and once`, async (t) => {
    const subject = newSubject()
    const limits = { hour: 2, day: 10 }
    const first = await store.reserve(subject, limits, T0)
    t.ok(first.allowed)
    const second = await store.reserve(subject, limits, T0 + 3_700_000)
    t.equal(second.windows[0].used, 1, 'the first stopped counting in the hour')
    t.equal(second.windows[1].used, 2)
    await store.refund(first.taken!)
    const now = await store.peek(subject, limits, T0 + 3_700_000)
    t.equal(now.windows[0].used, 1, 'the hour count is not pushed below what is counted')
    t.equal(now.windows[1].used, 1, 'the day bucket still counted: given back')
    t.notOk(now.allowed, 'a peek takes nothing')
    t.equal((await store.peek(subject, limits, T0 + 3_700_000)).windows[0].used, 1)
    await store.refund(first.taken!)
    t.equal((await store.peek(subject, limits, T0 + 3_700_000)).windows[1].used, 1, 'the same refund again gives nothing more')
  })

  t.test(`${name}: a clock that steps back counts the next request from the newest time`, async (t) => {
    const subject = newSubject()
    const limits = { hour: 2, day: 10 }
    t.ok((await store.reserve(subject, limits, T0)).allowed)
    t.ok((await store.reserve(subject, limits, T0 - 3_000_000)).allowed, 'taken, as if at T0')
    const later = await store.reserve(subject, limits, T0 + 700_000)
    t.notOk(later.allowed, 'both still count 700 s after T0')
    t.equal(later.windows[0].resetSeconds, 2900, 'until T0 + 3600 s')
    // Asked at a time before the requests it counts (a clock stepped back further, or an instance whose clock is
    // behind another's on the shared log): the wait is never said to be longer than the window.
    const behind = await store.reserve(subject, limits, T0 - 1_800_000)
    t.notOk(behind.allowed)
    t.same(behind.windows.map((window) => window.resetSeconds), [3600, 86_400], 'at most each window, though the slot of the hour frees 5,400 s from then')
  })

  t.test(`${name}: a refund of many ids at once`, async (t) => {
    const subject = newSubject()
    const limits = { hour: 20_000, day: 20_000 }
    const { decision } = await store.reserveMany!(subject, limits, T0, 9000)
    await store.refund(decision.taken!)
    t.equal((await store.peek(subject, limits, T0)).windows[1].used, 0, 'all 9,000 given back')
  })

  t.test(`${name}: a bulk reservation takes what fits, and gives back any of its slots`, async (t) => {
    const subject = newSubject()
    const limits = { hour: 5, day: 10 }
    const { decision, granted } = await store.reserveMany!(subject, limits, T0, 8)
    t.equal(granted, 5, 'as many as the hour has room for')
    t.equal(decision.taken?.ids.length, 5, 'one id per slot')
    t.equal(new Set(decision.taken?.ids).size, 5, 'each its own')
    await store.refund({ subject, ids: decision.taken!.ids.slice(3) })
    t.equal((await store.peek(subject, limits, T0)).windows[0].used, 3, 'the two given back no longer count')
  })
}

t.test('both stores answer alike on a long random run', { skip: REDIS_URL ? false : 'REDIS_URL is unset: no Redis to compare with' }, async (t) => {
  const [memory, redis] = stores.map(({ store }) => store)
  // A small deterministic generator: the run is the same every time.
  let seed = 42
  const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31)
  const pick = (n: number) => Math.floor(random() * n)
  const subjects = [newSubject(), newSubject()]
  const limits: QuotaLimits[] = [{ hour: 4, day: 9 }, { hour: 2, day: 30 }]
  const taken: [QuotaTaken, QuotaTaken][] = []
  let now = T0 + 1234
  let mismatches = 0
  for (let step = 0; step < 1500; step++) {
    const roll = pick(100)
    now += roll < 60 ? pick(90_000) : roll < 95 ? pick(900_000) : pick(30_000_000)
    if (pick(50) === 0) limits[pick(2)] = { hour: 1 + pick(6), day: 3 + pick(15) }
    const which = pick(2)
    const action = pick(100)
    let answers: QuotaDecision[]
    if (action < 20 && taken.length) {
      const [a, b] = taken.splice(pick(taken.length), 1)[0]
      await memory.refund(a)
      await redis.refund(b)
      answers = await Promise.all([memory.peek(subjects[which], limits[which], now), redis.peek(subjects[which], limits[which], now)])
    } else if (action < 30) {
      answers = await Promise.all([memory.peek(subjects[which], limits[which], now), redis.peek(subjects[which], limits[which], now)])
    } else {
      answers = await Promise.all([memory.reserve(subjects[which], limits[which], now), redis.reserve(subjects[which], limits[which], now)])
      if (answers[0].taken && answers[1].taken) taken.push([answers[0].taken, answers[1].taken])
    }
    const strip = (decision: QuotaDecision) => ({ allowed: decision.allowed, windows: decision.windows })
    if (JSON.stringify(strip(answers[0])) !== JSON.stringify(strip(answers[1]))) {
      mismatches++
      t.same(strip(answers[1]), strip(answers[0]), `step ${step}`)
      if (mismatches > 3) break
    }
  }
  t.equal(mismatches, 0, '1500 steps, the same answers')
})

t.test("Redis key: one hash tag per workspace, an expiry, and the last day's requests only", { skip: REDIS_URL ? false : 'REDIS_URL is unset' }, async (t) => {
  const store = redisStore!
  const subject: QuotaSubject = { workspaceId: 77, operation: 'create' }
  const key = store.key(subject)
  t.match(key, /^test-[^{}]*rl:\{ws:77\}:create$/)
  t.match(store.key({ workspaceId: 77, operation: 'update' }), /\{ws:77\}/, 'the same hash tag for every key of the workspace: one Cluster slot')

  // Three days of traffic, one request every 70 s: the log keeps the last day's only.
  const limits = { hour: 1_000_000, day: 1_000_000 }
  let now = T0
  let most = 0
  for (let i = 0; i < 3700; i++) {
    now += 70_000
    await store.reserve(subject, limits, now)
    if (i % 50 === 0) most = Math.max(most, await store.redis.zcard(key))
  }
  t.ok(most <= Math.ceil(86_400 / 70), `the log holds at most a day of requests: ${most}`)
  const decision = await store.peek(subject, limits, now)
  t.equal(decision.windows[0].used, Math.floor(3600 / 70) + 1, 'the hour counts the requests of the last hour')
  t.equal(decision.windows[1].used, Math.ceil(86_400 / 70), 'the day those of the last day')
  const ttl = await store.redis.pttl(key)
  t.ok(ttl > 86_300_000 && ttl <= 86_401_000, `the key expires a day after the last request: ${ttl} ms`)
})

t.test('Redis store: a reservation given up on at its deadline and failed by Redis later is no unhandled rejection', async (t) => {
  // The command outlives the store's deadline, then fails as ioredis fails a command whose connection it closes.
  const redis = {
    quotaReserve: () => new Promise((_resolve, reject) => setTimeout(() => reject(new Error('Reached the max retries per request limit')), 60)),
    quotaRefund: async () => 0,
  }
  const store = new RedisQuotaStore(redis as unknown as Redis, { deadlineMs: 10 })
  const unhandled: unknown[] = []
  const listener = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', listener)
  t.teardown(() => process.off('unhandledRejection', listener))
  const error = await store.reserve({ workspaceId: 1, operation: 'create' }, { hour: 10, day: 100 }, Date.now()).catch((thrown: unknown) => thrown)
  t.type(error, LateReservation)
  await new Promise((resolve) => setTimeout(resolve, 150))
  t.same(unhandled, [], 'nothing unhandled once Redis fails the late command')
  await t.rejects((error as LateReservation).late, /max retries/, 'the late reservation still says how it ended')
})

t.test('in-process store: the logs of workspaces gone quiet are dropped once their day has passed', async (t) => {
  const store = new MemoryQuotaStore()
  const limits = { hour: 100, day: 1000 }
  for (let workspaceId = 1; workspaceId <= 50; workspaceId++) await store.reserve({ workspaceId, operation: 'create' }, limits, T0)
  t.equal(store.subjects, 50)
  const busy: QuotaSubject = { workspaceId: 999, operation: 'update' }
  // A day later only one workspace is still at work; its calls sweep the others' logs in passing.
  for (let i = 0; i < 1100; i++) await store.peek(busy, limits, T0 + 86_400_000 + i)
  t.equal(store.subjects, 0, 'the quiet ones (and the busy one, which only looked) are gone')
  t.ok((await store.reserve({ workspaceId: 1, operation: 'create' }, { hour: 1, day: 1 }, T0 + 86_400_000 + 2000)).allowed, 'and their quota is whole again')
})

t.test("redis: by default requests are logged at Redis's time, so an instance whose clock runs ahead cannot shorten the others' waits", { skip: !REDIS_URL && 'needs REDIS_URL' }, async (t) => {
  const redis = createRedisClient(REDIS_URL!)
  await firstConnection(redis)
  const store = new RedisQuotaStore(redis, { keyPrefix: redisKeyPrefix(t), ownsClient: true })
  t.teardown(() => store.close())
  const subject = newSubject()
  const limits = { hour: 2, day: 10 }
  const tenMinutes = 600_000
  t.match(await store.reserve(subject, limits, Date.now() + tenMinutes), { allowed: true }, 'an instance 10 minutes ahead')
  t.match(await store.reserve(subject, limits, Date.now()), { allowed: true }, 'one on time')
  const [, score] = await redis.zrange(store.key(subject), 0, 0, 'WITHSCORES')
  t.ok(Math.abs(Number(score) - Date.now()) < 5_000, 'the first request is logged at the time it was taken, not 10 minutes on')
  const refused = await store.reserve(subject, limits, Date.now() - tenMinutes)
  t.equal(refused.allowed, false)
  const hour = refused.windows.find((window) => window.name === 'hour')!
  t.ok(hour.resetSeconds > 3590 && hour.resetSeconds <= 3600, `the wait counted from Redis's time too, whatever the caller's clock (${hour.resetSeconds} s)`)
})
