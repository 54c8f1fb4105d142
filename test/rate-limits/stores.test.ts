/**
 * The two quota stores side by side, without HTTP: they answer alike on long random runs of reservations,
 * refunds and peeks; a refund of a bucket that has stopped counting gives nothing back; and the Redis
 * keys carry the workspace hash tag, expire, and hold a bounded number of fields whatever the traffic.
 */
import t from 'tap'
import { MemoryQuotaStore } from '../../src/rate-limits/memory-store.js'
import type { QuotaDecision, QuotaLimits, QuotaStore, QuotaSubject, QuotaTaken } from '../../src/rate-limits/quota-store.js'
import { RedisQuotaStore } from '../../src/rate-limits/redis-store.js'
import { createRedisClient, firstConnection } from '../../src/redis/redis-client.js'
import { REDIS_URL, redisKeyPrefix, T0 } from './quota-support.js'

const stores: { name: string; store: QuotaStore }[] = [{ name: 'in-process', store: new MemoryQuotaStore() }]
let redisStore: RedisQuotaStore | undefined
if (REDIS_URL) {
  const redis = createRedisClient(REDIS_URL)
  await firstConnection(redis)
  redisStore = new RedisQuotaStore(redis, { keyPrefix: redisKeyPrefix(t), ownsClient: true })
  stores.push({ name: 'redis', store: redisStore })
}
t.teardown(() => Promise.all(stores.map(({ store }) => store.close())))

let subjects = 0
const newSubject = (): QuotaSubject => ({ workspaceId: 1000 + ++subjects, operation: subjects % 2 ? 'create' : 'update' })

for (const { name, store } of stores) {
  t.test(`${name}: a refund of a bucket that stopped counting gives nothing back`, async (t) => {
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

t.test('Redis keys: one hash tag per workspace, an expiry, and bounded fields', { skip: REDIS_URL ? false : 'REDIS_URL is unset' }, async (t) => {
  const store = redisStore!
  const subject: QuotaSubject = { workspaceId: 77, operation: 'create' }
  const keys = store.keys(subject)
  t.match(keys[0], /^test-[^{}]*rl:\{ws:77\}:create:hour$/)
  t.match(keys[1], /^test-[^{}]*rl:\{ws:77\}:create:day$/)
  const updateKeys = store.keys({ workspaceId: 77, operation: 'update' })
  t.ok(updateKeys.every((key) => key.includes('{ws:77}')), 'the same hash tag for every key of the workspace: one Cluster slot')

  // Three days of traffic, one request every 70 s: far more buckets than a window holds.
  const limits = { hour: 1_000_000, day: 1_000_000 }
  let now = T0
  let maxHour = 0
  let maxDay = 0
  for (let i = 0; i < 3700; i++) {
    now += 70_000
    await store.reserve(subject, limits, now)
    if (i % 50 === 0) {
      maxHour = Math.max(maxHour, await store.redis.hlen(keys[0]))
      maxDay = Math.max(maxDay, await store.redis.hlen(keys[1]))
    }
  }
  t.ok(maxHour <= 361 + 2, `the hour hash stays within its 361 buckets (+ 2 fields): ${maxHour}`)
  t.ok(maxDay <= 289 + 2, `the day hash stays within its 289 buckets (+ 2 fields): ${maxDay}`)
  const decision = await store.peek(subject, limits, now)
  t.equal(decision.windows[0].used, Math.floor(3600 / 70) + 1, 'the hour counts the requests of the last hour')
  const hourTtl = await store.redis.pttl(keys[0])
  const dayTtl = await store.redis.pttl(keys[1])
  t.ok(hourTtl > 0 && hourTtl <= 3620_000, `the hour key expires after a window and two buckets: ${hourTtl} ms`)
  t.ok(dayTtl > 0 && dayTtl <= 87_000_000, `the day key too: ${dayTtl} ms`)
})
