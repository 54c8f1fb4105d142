/**
 * The service of `npm run soak` (bench/soak.ts), in a process of its own started as `npm start` runs it
 * (bench/support/child-server.ts): the real app with its production logger (LOG_LEVEL=info), PostgreSQL from
 * DATABASE_URL (on a database of the run's own, dropped at the end) else an in-memory PGlite, Redis from
 * REDIS_URL (under a key prefix of the run's own, deleted at the end) else the in-process stores. It holds a
 * workspace with quotas too large to be reached, default domain go.soak.test and 10,000 links l1 … l10000.
 * The parent talks to it over IPC: the set-up once listening, then `stats` (RSS, V8 heap, visits) and `stop`.
 */
import type { FastifyInstance } from 'fastify'
import { randomBytes } from 'node:crypto'
import { buildApp, loggerOptions } from '../src/app.js'
import { deleteKeys } from '../test/rate-limits/quota-support.js'
import { openTestDatabase } from '../test/support/test-app.js'
import { benchConfig, seedWorkspace } from './support/bench-service.js'

export const SOAK_DOMAIN = 'go.soak.test'
export const SOAK_LINKS = 10_000

const teardowns: (() => unknown)[] = []
const keyPrefix = `soak-${randomBytes(4).toString('hex')}:`
const config = benchConfig({ REDIS_KEY_PREFIX: keyPrefix })
if (config.redisUrl) teardowns.push(() => deleteKeys(config.redisUrl!, keyPrefix))
const { database } = await openTestDatabase({ teardown: (fn) => teardowns.unshift(fn) })
const { token, firstLink } = await seedWorkspace(database, { name: 'soak', domain: SOAK_DOMAIN, isDefault: true, unlimited: true, count: SOAK_LINKS })
const app: FastifyInstance = await buildApp({ config, database, logger: loggerOptions(config) })
await app.listen({ port: 0, host: '127.0.0.1' })

process.on('message', async (message: string) => {
  if (message === 'stats') {
    const memory = process.memoryUsage()
    process.send!({ rss: memory.rss, heapUsed: memory.heapUsed, heapTotal: memory.heapTotal, visits: app.visitRecorder?.stats() ?? null })
  } else if (message === 'stop') {
    await app.close()
    for (const teardown of teardowns) await teardown()
    process.exit(0)
  }
})
process.send!({
  port: (app.server.address() as { port: number }).port,
  token,
  firstLink,
  database: database.kind === 'embedded' ? 'in-memory PGlite' : 'PostgreSQL (DATABASE_URL)',
  redis: config.redisUrl ? 'Redis (REDIS_URL)' : 'in-process stores',
})
