/**
 * Several instances of the service, as a load balancer runs them: three real server processes on one PostgreSQL
 * database and one Redis (a key prefix of this run's own, REDIS_KEY_PREFIX), each request sent to one of them
 * in turn. What one instance does, the others honour: the quotas are one count, a slug is taken once, an
 * Idempotency-Key is served once, a revoked token and a changed link are seen by every instance within a second.
 *
 * Each property is one subtest on the shared `cluster` (the three instances, the database, helpers to send a
 * request to any of them and to wait for all of them); another property is one more `t.test` of the same form.
 */
import { once } from 'node:events'
import { request as httpRequest } from 'node:http'
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { runCli } from '../../src/cli/main.js'
import { openDatabase, type Database } from '../../src/db/database.js'
import { addDomain, createToken, setLimits } from '../../src/workspaces/workspace-repository.js'
import { REDIS_URL, redisKeyPrefix } from '../rate-limits/quota-support.js'
import { createScratchDatabase } from '../support/scratch-database.js'
import { logLines, startServer, type RunningServer } from '../support/server-process.js'

const DATABASE_URL = process.env.DATABASE_URL || undefined
const skip = !DATABASE_URL ? 'DATABASE_URL is not set (the embedded database is one process only)' : !REDIS_URL ? 'REDIS_URL is not set (instances share state through Redis)' : false

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
  json(): any
}

interface Instance {
  name: string
  server: RunningServer
  send(method: string, path: string, options?: SendOptions): Promise<Answer>
}

interface SendOptions {
  token?: string
  host?: string
  body?: unknown
  headers?: Record<string, string>
}

/** One HTTP request on loopback (node:http, which lets a test set the Host header of a visit). */
function sendTo(port: number) {
  return async (method: string, path: string, options: SendOptions = {}): Promise<Answer> => {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
    const headers: Record<string, string | number> = { ...options.headers }
    if (options.token) headers['api-authorization'] = options.token
    if (options.host) headers.host = options.host
    if (payload !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) })
    const request = httpRequest({ host: '127.0.0.1', port, method, path, headers, timeout: 15_000 })
    request.on('timeout', () => request.destroy(new Error(`${method} ${path}: no answer within 15 s`)))
    request.end(payload)
    const [response] = (await once(request, 'response')) as [import('node:http').IncomingMessage]
    let body = ''
    for await (const chunk of response) body += chunk
    return { status: response.statusCode!, headers: response.headers, body, json: () => JSON.parse(body) }
  }
}

/** The workspace of a subtest: its own name, token and default domain (go.<name>.test), optional quotas. */
async function workspace(database: Database, label: string, limits?: { hour?: number; day?: number }) {
  const name = `${label}-${randomBytes(3).toString('hex')}`
  const domain = `go.${name}.test`
  const { token } = await createToken(database.prisma, { workspace: name })
  await addDomain(database.prisma, { workspace: name, host: domain, isDefault: true, reservedDomains: ['short.test'] })
  if (limits) await setLimits(database.prisma, { workspace: name, ...limits })
  return { name, token, domain }
}

/**
 * Sends `probe` to every instance again and again until `done` holds for each; returns, per instance, how long
 * after `since` the first request that satisfied it was sent. It also fails the test when a request sent a second
 * or more after `since` still got the old answer: a request sent then is handled later still, so anything cached
 * before `since` must have been given up by then (the TTL and pub/sub promise of the service).
 */
async function untilAll(
  t: Test,
  instances: Instance[],
  since: number,
  probe: (instance: Instance) => Promise<Answer>,
  done: (answer: Answer) => boolean,
): Promise<number[]> {
  return Promise.all(
    instances.map(async (instance) => {
      for (;;) {
        const sent = Date.now()
        const answer = await probe(instance)
        if (done(answer)) return sent - since
        if (sent - since >= 1000) {
          t.fail(`${instance.name} still gave the old answer (${answer.status}) to a request sent ${sent - since} ms after the change`)
          return sent - since
        }
        await sleep(20)
      }
    }),
  )
}

t.test('three instances on one PostgreSQL and one Redis', { skip, timeout: 120_000 }, async (t) => {
  const { url, drop } = await createScratchDatabase(DATABASE_URL!, `instances_${process.pid}`)
  // Migrated here once, so the three starts find it ready (a fresh database would be migrated by the first
  // under PostgreSQL's advisory lock while the others wait).
  const database = await openDatabase({ databaseUrl: url, dataDir: 'unused' })
  t.teardown(async () => {
    await database.close()
    await drop()
  })
  const env = {
    DATABASE_URL: url,
    REDIS_URL: REDIS_URL!,
    REDIS_KEY_PREFIX: redisKeyPrefix(t),
    DEFAULT_DOMAIN: 'short.test',
    RESERVED_DOMAINS: 'short.test',
    // The same on every instance, as the README asks (password cookies are accepted by all).
    COOKIE_SECRET: randomBytes(32).toString('base64url'),
  }
  // Workspaces (and their domains) before the start: each instance reads the short domains when it starts.
  const quotas = {
    hourly: await workspace(database, 'hourly', { hour: 9, day: 1000 }),
    daily: await workspace(database, 'daily', { hour: 1000, day: 7 }),
  }
  const slugs = await workspace(database, 'slugs')
  const revoked = await workspace(database, 'revoked')
  const links = await workspace(database, 'links')
  const retries = await workspace(database, 'retries')

  const servers = await Promise.all(['A', 'B', 'C'].map(() => startServer(env)))
  t.teardown(async () => {
    for (const server of servers) if (server.child.exitCode === null) server.child.kill('SIGKILL')
  })
  const instances: Instance[] = servers.map((server, i) => ({ name: 'ABC'[i], server, send: sendTo(server.port) }))
  // Each instance hears link changes once its subscriber is connected: wait for all three to be ready for it.
  for (const instance of instances) {
    for (let tries = 0; (await instance.send('GET', '/readyz')).status !== 200; tries++) {
      if (tries > 100) throw new Error(`${instance.name} not ready`)
      await sleep(100)
    }
  }
  const create = (instance: Instance, token: string, link: Record<string, unknown>) =>
    instance.send('POST', '/v1/links/create', { token, body: { link, autofill: false } })
  const stored = async (domain: string) =>
    database.prisma.link.count({ where: { domain } })

  t.test('the hourly and the daily quota are one count across the instances', async (t) => {
    for (const [window, { token, domain }, limit] of [['hour', quotas.hourly, 9], ['day', quotas.daily, 7]] as const) {
      // First one request on each instance in turn: the count each one reports includes the others'.
      const remaining: string[] = []
      for (const instance of instances) {
        const answer = await create(instance, token, { url: `https://example.com/${window}/${instance.name}` })
        t.equal(answer.status, 201, answer.body)
        remaining.push(String(answer.headers['x-ratelimit-remaining']))
      }
      t.same(remaining, [limit - 1, limit - 2, limit - 3].map(String), `${window}: remaining after A, B, C`)

      // Then a concurrent burst spread over the three: exactly the rest of the quota succeeds.
      const burst = await Promise.all(
        Array.from({ length: 12 }, (_, i) => create(instances[i % 3], token, { url: `https://example.com/${window}/burst-${i}` })),
      )
      const statuses = burst.map((answer) => answer.status)
      t.equal(statuses.filter((status) => status === 201).length, limit - 3, `${window}: ${limit - 3} more created`)
      t.equal(statuses.filter((status) => status === 429).length, 12 - (limit - 3), `${window}: the others refused`)
      t.equal(await stored(domain), limit, `${window}: exactly ${limit} links stored`)

      // Every instance now refuses, with the contract's 429.
      for (const instance of instances) {
        const refused = await create(instance, token, { url: 'https://example.com/over' })
        t.equal(refused.status, 429, `${window}: ${instance.name} refuses`)
        t.match(refused.json(), { status: 429, code: 'rate_limited' })
        t.match(refused.headers['retry-after'], /^\d+$/)
        t.equal(refused.headers['x-ratelimit-remaining'], '0')
        t.equal(refused.headers['x-ratelimit-limit'], String(limit))
      }
      t.equal(await stored(domain), limit, `${window}: still ${limit} links stored`)
    }
  })

  t.test('the same slug created on the three at once: one 201, two 409 slug_taken, one row', async (t) => {
    // Different spellings of one slug: they are the same link (slugs ignore case).
    for (const [round, spellings] of [['promo', ['promo', 'Promo', 'PROMO']], ...[1, 2, 3, 4].map((n) => [`race-${n}`, [`race-${n}`, `race-${n}`, `race-${n}`]])] as [string, string[]][]) {
      const answers = await Promise.all(
        instances.map((instance, i) => create(instance, slugs.token, { id: spellings[i], url: `https://example.com/${round}/${instance.name}` })),
      )
      const statuses = answers.map((answer) => answer.status).sort()
      t.same(statuses, [201, 409, 409], `${round}: one created, two refused`)
      for (const answer of answers.filter((answer) => answer.status === 409)) {
        t.match(answer.headers['content-type'], /^application\/problem\+json/)
        t.match(answer.json(), { type: 'about:blank', title: 'Conflict', status: 409, code: 'slug_taken', detail: String })
      }
      const rows = await database.prisma.link.findMany({ where: { domain: slugs.domain, slugKey: round } })
      t.equal(rows.length, 1, `${round}: one row`)
      const winner = answers.find((answer) => answer.status === 201)!.json()
      t.equal(rows[0].url, winner.url, `${round}: the row is the one the 201 answered`)
    }
  })

  t.test('a token revoked by the command line is refused by every instance within a second', async (t) => {
    const list = (instance: Instance) => instance.send('GET', '/v1/links?limit=1', { token: revoked.token })
    t.same(await Promise.all(instances.map(async (instance) => (await list(instance)).status)), [200, 200, 200], 'each instance has read the token')
    let printed = ''
    const code = await runCli(['token:revoke', revoked.token], { stdout: { write: (text: string) => (printed += text) }, stderr: process.stderr }, { database })
    t.equal(code, 0)
    t.match(printed, /^sl_/, 'the CLI printed the prefix')
    const revokedAt = Date.now()
    const after = await untilAll(t, instances, revokedAt, list, (answer) => answer.status === 401)
    t.ok(after.every((ms) => ms <= 1000), `refused after ${after.join(', ')} ms`)
    for (const instance of instances) {
      const answer = await list(instance)
      t.equal(answer.status, 401)
      t.match(answer.json(), { status: 401, code: 'unauthorized' })
    }
  })

  t.test('a link updated or deleted through one instance is served fresh by all within a second', async (t) => {
    const visit = (instance: Instance) => instance.send('GET', '/news', { host: links.domain })
    const created = await create(instances[0], links.token, { id: 'news', url: 'https://example.com/old' })
    t.equal(created.status, 201, created.body)
    const { uniq } = created.json()
    // Warm: each instance has the link in its cache (two visits, the second served from it).
    for (const instance of instances) {
      for (let i = 0; i < 2; i++) {
        const answer = await visit(instance)
        t.equal(answer.status, 302, `${instance.name} redirects`)
        t.equal(answer.headers.location, 'https://example.com/old')
      }
    }

    const updated = await instances[1].send('PUT', `/v1/links/${uniq}`, { token: links.token, body: { link: { url: 'https://example.com/new' }, autofill: false } })
    t.equal(updated.status, 200, updated.body)
    const updatedAt = Date.now()
    const toNew = await untilAll(t, instances, updatedAt, visit, (answer) => answer.headers.location === 'https://example.com/new')
    t.ok(toNew.every((ms) => ms <= 1000), `new url served after ${toNew.join(', ')} ms`)

    const deleted = await instances[2].send('DELETE', `/v1/links/${uniq}`, { token: links.token })
    t.equal(deleted.status, 204)
    const deletedAt = Date.now()
    const gone = await untilAll(t, instances, deletedAt, visit, (answer) => answer.status === 404)
    t.ok(gone.every((ms) => ms <= 1000), `404 after ${gone.join(', ')} ms`)
    t.equal(await database.prisma.link.count({ where: { uniq } }), 0, 'deleted in the database')
  })

  t.test('links created in bulk through one instance, after visitors met their addresses unknown on all: served by all within a second', async (t) => {
    const slugs = ['bulk-one', 'bulk-two']
    // Each instance now knows both addresses as unknown (kept for 10 s unless told of a change).
    for (const instance of instances) {
      for (const slug of slugs) {
        for (let i = 0; i < 2; i++) t.equal((await instance.send('GET', `/${slug}`, { host: links.domain })).status, 404, `${instance.name} /${slug}: 404`)
      }
    }
    const bulk = await instances[0].send('POST', '/v1/links/bulk', {
      token: links.token,
      body: { links: slugs.map((slug) => ({ id: slug, url: `https://example.com/${slug}` })), autofill: false },
    })
    t.equal(bulk.status, 200, bulk.body)
    t.same(bulk.json().results.map((result: { status: number }) => result.status), [201, 201])
    const createdAt = Date.now()
    for (const slug of slugs) {
      const visit = (instance: Instance) => instance.send('GET', `/${slug}`, { host: links.domain })
      const served = await untilAll(t, instances, createdAt, visit, (answer) => answer.headers.location === `https://example.com/${slug}`)
      t.ok(served.every((ms) => ms <= 1000), `/${slug} served after ${served.join(', ')} ms`)
    }
  })

  t.test('one Idempotency-Key sent to the three at once: one link, then the same answer from each', async (t) => {
    const body = { link: { url: 'https://example.com/retry', id: 'retry' }, autofill: false }
    const send = (instance: Instance, link = body) =>
      instance.send('POST', '/v1/links/create', { token: retries.token, body: link, headers: { 'idempotency-key': '"retry-1"' } })
    const burst = await Promise.all(Array.from({ length: 9 }, (_, i) => send(instances[i % 3])))
    const created = burst.filter((answer) => answer.status === 201 && answer.headers['idempotent-replayed'] === undefined)
    t.equal(created.length, 1, 'one request created the link')
    for (const answer of burst.filter((answer) => !created.includes(answer))) {
      // The others came while it was being served (409), or after (its answer again).
      if (answer.status === 201) t.same([answer.body, answer.headers['idempotent-replayed']], [created[0].body, 'true'])
      else t.match([answer.status, answer.json().code], [409, 'idempotency_key_in_use'])
    }
    for (const instance of instances) {
      const again = await send(instance)
      t.same([again.status, again.body, again.headers['idempotent-replayed']], [201, created[0].body, 'true'], `${instance.name} replays it`)
      const other = await send(instance, { ...body, link: { ...body.link, url: 'https://example.com/other' } })
      t.match([other.status, other.json().code], [422, 'idempotency_key_reused'], `${instance.name}: another body is 422`)
    }
    t.equal(await stored(retries.domain), 1, 'one link stored')
  })

  t.test('the instances shut down cleanly, having logged no error', async (t) => {
    for (const server of servers) server.child.kill('SIGTERM')
    const codes = await Promise.all(servers.map(async (server) => (server.child.exitCode ?? (await once(server.child, 'exit'))[0])))
    t.same(codes, [0, 0, 0])
    for (const [i, server] of servers.entries()) {
      const errors = logLines(server.output()).filter((line) => line.level >= 50)
      t.same(errors, [], `${'ABC'[i]} logged no error (no 500)`)
    }
  })
})
