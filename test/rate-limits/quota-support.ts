/** Shared by the rate-limit tests: a clock they drive, Redis key namespaces of their own, quota workspaces. */
import type { LightMyRequestResponse } from 'fastify'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { Redis } from 'ioredis'
import type { Database } from '../../src/db/database.js'
import { setLimits } from '../../src/workspaces/workspace-repository.js'
import { createWorkspaceToken } from '../support/test-app.js'

/** The machine's Redis, when the run uses one (CI sets it). */
export const REDIS_URL = process.env.REDIS_URL || undefined

/** A bucket boundary of both windows (a multiple of 300 s), so reset times are exact numbers. */
export const T0 = Date.UTC(2030, 0, 1, 0, 0, 0)

export class FakeClock {
  ms = T0
  readonly now = () => this.ms
  set(ms: number) {
    this.ms = ms
  }
  advance(seconds: number) {
    this.ms += seconds * 1000
  }
}

/**
 * A key prefix of this run's own: test files run side by side on one Redis, each with databases whose
 * workspace ids start at 1, and runs repeat; deleted when the test ends.
 */
export function redisKeyPrefix(t: { teardown(fn: () => unknown): void }, redisUrl = REDIS_URL): string {
  const prefix = `test-${process.pid}-${randomBytes(4).toString('hex')}:`
  if (redisUrl) t.teardown(() => deleteKeys(redisUrl, prefix))
  return prefix
}

export async function deleteKeys(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0 })
  // A refused connection is also emitted as an event, which ioredis prints when nothing listens.
  redis.on('error', () => {})
  try {
    await redis.connect()
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      if (keys.length) await redis.del(...keys)
      cursor = next
    } while (cursor !== '0')
  } catch {
    // The Redis of an outage test may be gone already: nothing left to clean.
  } finally {
    redis.disconnect()
  }
}

let workspaces = 0

/** A workspace of its own (default domain go.<name>.test) with the given quotas; returns its name and token. */
export async function quotaWorkspace(
  prisma: Database['prisma'],
  label: string,
  limits: { hour?: number; day?: number },
  options: { official?: boolean } = {},
) {
  const name = `${label.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}-${++workspaces}`
  const token = await createWorkspaceToken(prisma, { workspace: name, defaultDomain: `go.${name}.test`, official: options.official })
  if (limits.hour !== undefined || limits.day !== undefined) await setLimits(prisma, { workspace: name, ...limits })
  return { name, token, domain: `go.${name}.test` }
}

/** The five quota headers of a response (undefined when absent). */
export function quotaHeaders(response: LightMyRequestResponse) {
  const header = (name: string) => response.headers[name] as string | undefined
  return {
    policy: header('ratelimit-policy'),
    rateLimit: header('ratelimit'),
    limit: header('x-ratelimit-limit'),
    remaining: header('x-ratelimit-remaining'),
    reset: header('x-ratelimit-reset'),
  }
}

/** The statuses of several responses, counted: { 201: 5, 429: 10 }. */
export function countStatuses(responses: LightMyRequestResponse[]): Record<number, number> {
  const counts: Record<number, number> = {}
  for (const response of responses) counts[response.statusCode] = (counts[response.statusCode] ?? 0) + 1
  return counts
}

/** A loopback port nothing listens on (it was free a moment ago): where a Redis that is down would be. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  await once(server, 'close')
  return port
}
