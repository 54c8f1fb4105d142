/**
 * Redis outages (contract section 8): a request never waits more than 250 ms on Redis; under
 * RATE_LIMIT_ON_REDIS_ERROR=allow it goes through and a warning is logged, under deny it gets 503; the
 * service recovers by itself when Redis comes back. The Redis servers here are the test's own: one port
 * where nothing listens, and a redis-server it starts, stops, freezes and starts again.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { Redis } from 'ioredis'
import t from 'tap'
import { buildTestApp, client, json, openTestDatabase } from '../support/test-app.js'
import { freePort, quotaHeaders, quotaWorkspace, redisKeyPrefix } from './quota-support.js'

const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0

/** A redis-server of the test's own, without persistence, on `port`; resolves once it accepts connections. */
async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'])
  let output = ''
  await new Promise<void>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk
      if (output.includes('Ready to accept connections')) resolve()
    })
    child.on('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output}`)))
  })
  return child
}

async function stopRedis(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill('SIGKILL')
  await once(child, 'exit')
}

/** Log lines (JSON) of an app, kept to look at. */
function capturedLogger() {
  const lines: Record<string, any>[] = []
  return {
    lines,
    logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } },
    warnings: (pattern: RegExp) => lines.filter((line) => line.level === 40 && pattern.test(line.msg)),
  }
}

async function timed(send: () => Promise<LightMyRequestResponse>) {
  const start = performance.now()
  const response = await send()
  return { response, ms: performance.now() - start }
}

/**
 * An answer slower than this hung: a request waits at most 250 ms for Redis. The bound is loose because the test
 * runs beside others on two cores, where a request can take a few hundred milliseconds on its own; how long the
 * limiter adds is measured by `npm run bench:rate-limit`, not here.
 */
const HANG_BOUND_MS = 1500

/** The counters could not be read: where the quota stands is unknown, the policy is not (contract section 8). */
const policyOnly = (hour: number, day: number) => ({ policy: `"hour";q=${hour};w=3600, "day";q=${day};w=86400`, rateLimit: undefined, limit: undefined, remaining: undefined, reset: undefined })
const url = (n: number | string) => `https://example.com/outage/${n}`

const { database } = await openTestDatabase(t)
const { prisma } = database

async function appsOn(t: { teardown(fn: () => unknown): void }, redisUrl: string) {
  const keyPrefix = redisKeyPrefix(t, redisUrl)
  const build = async (policy: 'allow' | 'deny') => {
    const log = capturedLogger()
    const { app } = await buildTestApp(t, {
      database,
      env: { REDIS_URL: redisUrl, RATE_LIMIT_ON_REDIS_ERROR: policy },
      logger: log.logger,
      rateLimits: { keyPrefix },
    })
    return { app, log }
  }
  return { allow: await build('allow'), deny: await build('deny') }
}

t.test('Redis unreachable (nothing listens on the port)', async (t) => {
  const port = await freePort()
  const { allow, deny } = await appsOn(t, `redis://127.0.0.1:${port}`)
  const ws = await quotaWorkspace(prisma, 'dead port', { hour: 1, day: 1 })
  t.ok(allow.log.warnings(/Redis is not reachable yet/).length, 'the start says Redis is not reachable yet')
  // The first requests of an app also warm up its database queries: not part of what is timed.
  const warmUp = await quotaWorkspace(prisma, 'warm up', {})
  for (const app of [allow.app, deny.app]) {
    await client(app, warmUp.token).create({ url: url('warm-up') })
    await client(app, warmUp.token).update(1, {})
  }

  for (let i = 0; i < 3; i++) {
    const { response, ms } = await timed(() => client(allow.app, ws.token).create({ url: url(i) }))
    t.equal(response.statusCode, 201, 'allow: the request goes through (the quota of 1 is not enforced)')
    t.same(quotaHeaders(response), policyOnly(1, 1), 'allow: the policy alone; where the quota stands is not known')
    t.ok(ms < HANG_BOUND_MS, `allow: answered in ${ms.toFixed(1)} ms, no hang`)
  }
  const warnings = allow.log.warnings(/rate-limit store unreachable: requests go through/)
  t.equal(warnings.length, 1, 'one warning for the outage, not one per request')
  t.match(warnings[0], { policy: 'allow', err: { message: /enableOfflineQueue|ECONNREFUSED|Connection/ } })

  for (let i = 0; i < 3; i++) {
    const { response, ms } = await timed(() => client(deny.app, ws.token).create({ url: url(`d${i}`) }))
    t.equal(response.statusCode, 503, 'deny: 503')
    t.match(json(response), { status: 503, code: 'unavailable', detail: /rate-limit store/ })
    t.ok(ms < HANG_BOUND_MS, `deny: answered in ${ms.toFixed(1)} ms, no hang`)
  }
  t.equal(deny.log.warnings(/rate-limit store unreachable: requests are refused/).length, 1)
})

t.test('Redis stops, freezes and comes back: the policy applies without hanging, then limits work again without a restart', { skip: hasRedisServer ? false : 'no redis-server binary on this machine' }, async (t) => {
  const port = await freePort()
  let redis = await startRedis(port)
  t.teardown(() => stopRedis(redis))
  const { allow, deny } = await appsOn(t, `redis://127.0.0.1:${port}`)
  const apps: [string, FastifyInstance][] = [['allow', allow.app], ['deny', deny.app]]

  const before = await quotaWorkspace(prisma, 'before outage', { hour: 2, day: 10 })
  for (const [policy, app] of apps) {
    const response = await client(app, before.token).create({ url: url(policy) })
    t.equal(response.statusCode, 201, `${policy}: works while Redis is up`)
    t.ok(quotaHeaders(response).rateLimit, `${policy}: with quota headers`)
  }
  t.equal((await client(deny.app, before.token).create({ url: url('third') })).statusCode, 429, 'both instances count in the one Redis')

  await stopRedis(redis)
  for (let i = 0; i < 3; i++) {
    const allowed = await timed(() => client(allow.app, before.token).create({ url: url(`down-${i}`) }))
    t.equal(allowed.response.statusCode, 201, 'Redis down, allow: through')
    t.ok(allowed.ms < HANG_BOUND_MS, `allow answered in ${allowed.ms.toFixed(1)} ms, no hang`)
    const denied = await timed(() => client(deny.app, before.token).create({ url: url(`down-d${i}`) }))
    t.equal(denied.response.statusCode, 503, 'Redis down, deny: 503')
    t.ok(denied.ms < HANG_BOUND_MS, `deny answered in ${denied.ms.toFixed(1)} ms, no hang`)
  }

  redis = await startRedis(port)
  const after = await quotaWorkspace(prisma, 'after outage', { hour: 2, day: 10 })
  const recovered = async (app: FastifyInstance) => {
    for (let i = 0; i < 50; i++) {
      const response = await client(app, after.token).update(1, {})
      if (quotaHeaders(response).rateLimit) return true
      await sleep(100)
    }
    return false
  }
  for (const [policy, app] of apps) t.ok(await recovered(app), `${policy}: Redis answers again, no restart`)
  t.ok(allow.log.lines.some((line) => /rate-limit store reachable again/.test(line.msg)), 'the recovery is logged')
  const responses = []
  for (let i = 0; i < 3; i++) responses.push(await client(apps[i % 2][1], after.token).create({ url: url(`back-${i}`) }))
  t.same(responses.map((r) => r.statusCode), [201, 201, 429], 'the quota is enforced again, across both instances')
  const { uniq } = json(responses[0])

  // Frozen (SIGSTOP): connected but silent. Nothing waits much more than the 250 ms budget: the upper bound is
  // loose (a loaded machine adds scheduling delay) but well below the 2 s after which the socket is dropped,
  // which is what a request would wait without the budget.
  redis.kill('SIGSTOP')
  try {
    const allowed = await timed(() => client(allow.app, after.token).update(uniq, { note: 'frozen' }, { autofill: false }))
    t.equal(allowed.response.statusCode, 200, 'frozen, allow: updated')
    t.same(quotaHeaders(allowed.response), policyOnly(2, 10), 'the policy alone')
    t.ok(allowed.ms >= 250 && allowed.ms < HANG_BOUND_MS, `allow waited the budget and no more: ${allowed.ms.toFixed(1)} ms`)
    const denied = await timed(() => client(deny.app, after.token).update(uniq, { note: 'denied' }, { autofill: false }))
    t.equal(denied.response.statusCode, 503, 'frozen, deny: 503')
    t.ok(denied.ms >= 250 && denied.ms < HANG_BOUND_MS, `deny waited the budget and no more: ${denied.ms.toFixed(1)} ms`)
    const stored = await prisma.link.findUniqueOrThrow({ where: { uniq } })
    t.equal(stored.note, 'frozen', 'the refused update changed nothing')
  } finally {
    redis.kill('SIGCONT')
  }
  for (const [policy, app] of apps) t.ok(await recovered(app), `${policy}: answers again after the freeze`)
})

t.test(
  'Redis frozen past its socket timeout: what it runs on waking from the dropped connection takes no quota and holds no key',
  { skip: hasRedisServer ? false : 'no redis-server binary on this machine' },
  async (t) => {
    const port = await freePort()
    const redis = await startRedis(port)
    t.teardown(() => stopRedis(redis))
    const { deny } = await appsOn(t, `redis://127.0.0.1:${port}`)
    const workspace = await quotaWorkspace(prisma, 'frozen long', { hour: 10, day: 20 })
    const api = client(deny.app, workspace.token)
    t.equal((await api.create({ url: url('before-freeze') })).statusCode, 201)
    const keyed = () => api.send('POST', '/v1/links/create', { link: { url: url('keyed-freeze') }, autofill: false }, { 'idempotency-key': 'frozen-key' })

    // Frozen longer than the client's socket timeout (2 s): the connection is dropped with the commands it holds,
    // and Redis, once it wakes, still runs what it had received on it (the reservations, the key's claim).
    redis.kill('SIGSTOP')
    try {
      for (let i = 0; i < 2; i++) t.equal((await api.create({ url: url(`frozen-${i}`) })).statusCode, 503, 'deny: 503')
      t.equal((await keyed()).statusCode, 503, 'a keyed create: 503')
      await sleep(2600)
    } finally {
      redis.kill('SIGCONT')
    }
    const inspector = new Redis(`redis://127.0.0.1:${port}`)
    t.teardown(() => inspector.quit())
    const logKeys = async () => (await inspector.keys('*rl:*:create')).length
    const countsNow = async () => {
      const [key] = await inspector.keys('*rl:*:create')
      return key ? inspector.zcard(key) : 0
    }
    // The slots the refused requests' scripts took are given back once Redis answers (refunds are retried every second).
    let counted = Infinity
    for (let waited = 0; waited < 8000 && counted !== 1; waited += 200) {
      await sleep(200)
      counted = (await logKeys()) === 1 ? await countsNow() : Infinity
    }
    t.equal(counted, 1, 'the log holds the one create that succeeded, not the two refused ones')
    // The keyed create was answered 503 (safe to send again): its retry runs, rather than 409 for the 2-minute lease.
    let retried = await keyed()
    for (let waited = 0; waited < 8000 && retried.statusCode !== 201; waited += 200) {
      await sleep(200)
      retried = await keyed()
    }
    t.equal(retried.statusCode, 201, `the retry of the keyed create runs (last answer ${retried.statusCode} ${retried.body})`)
  },
)
