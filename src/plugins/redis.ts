/**
 * `app.redis`: the instance's Redis client when REDIS_URL is set (null otherwise), shared by the rate-limit
 * counters and the autofill cache, closed with the app. Start-up never waits for it: a Redis that is down
 * is met by each use with its own fallback (src/redis/redis-client.ts).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Redis } from 'ioredis'
import { ConfigError, type Config } from '../config/config.js'
import { redisDatabaseIndex } from '../redis/database-index.js'
import { closeRedisClient, createRedisClient, firstConnection, withDeadline } from '../redis/redis-client.js'

/** The client's connection errors and reconnection attempts since start: metrics. */
export interface RedisCounts {
  errors: number
  reconnects: number
}

declare module 'fastify' {
  interface FastifyInstance {
    redis: Redis | null
    redisCounts: RedisCounts
  }
}

const MISSING_DATABASE = /DB index is out of range|invalid DB index/i

/**
 * REDIS_URL's database index must be one the server has: ioredis, should its SELECT fail, goes on in database 0,
 * where the counters and keys would mix with whatever else uses it. A Redis reachable at start is asked (the start
 * stops, naming REDIS_URL); one reached later that refuses the index is let go (every use then meets Redis as
 * unavailable, with its fallback) and an error is logged.
 */
async function checkDatabaseIndex(app: FastifyInstance, client: Redis, url: string): Promise<void> {
  const index = Number(redisDatabaseIndex(url) || 0)
  if (index === 0) return
  const refused = (error: unknown) => error instanceof Error && MISSING_DATABASE.test(error.message)
  let started = false
  let refusedIndex = false
  client.on('error', (error: unknown) => {
    if (!refused(error)) return
    refusedIndex = true
    if (started) app.log.error(`REDIS_URL names database ${index}, which this Redis does not have: Redis is not used until the service is restarted with another`)
    client.disconnect()
  })
  if ((await firstConnection(client)) && !refusedIndex) {
    await withDeadline(client.select(index)).catch((error: unknown) => {
      refusedIndex ||= refused(error)
    })
  }
  if (refusedIndex) {
    client.disconnect()
    throw new ConfigError(`REDIS_URL names database ${index}, which this Redis does not have (see its "databases" setting)`)
  }
  started = true
}

export default fp(
  async function redis(app: FastifyInstance, options: { config: Config }) {
    const client = options.config.redisUrl ? createRedisClient(options.config.redisUrl) : null
    app.decorate('redis', client)
    const counts: RedisCounts = { errors: 0, reconnects: 0 }
    app.decorate('redisCounts', counts)
    if (client) {
      await checkDatabaseIndex(app, client, options.config.redisUrl!)
      client.on('error', () => counts.errors++)
      client.on('reconnecting', () => counts.reconnects++)
      app.addHook('onClose', () => closeRedisClient(client))
    }
  },
  { name: 'redis' },
)
