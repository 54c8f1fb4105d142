/**
 * `app.redis`: the instance's Redis client when REDIS_URL is set (null otherwise), shared by the rate-limit
 * counters and the autofill cache, closed with the app. Start-up never waits for it: a Redis that is down
 * is met by each use with its own fallback (src/redis/redis-client.ts).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Redis } from 'ioredis'
import type { Config } from '../config/config.js'
import { closeRedisClient, createRedisClient } from '../redis/redis-client.js'

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

export default fp(
  async function redis(app: FastifyInstance, options: { config: Config }) {
    const client = options.config.redisUrl ? createRedisClient(options.config.redisUrl) : null
    app.decorate('redis', client)
    const counts: RedisCounts = { errors: 0, reconnects: 0 }
    app.decorate('redisCounts', counts)
    if (client) {
      client.on('error', () => counts.errors++)
      client.on('reconnecting', () => counts.reconnects++)
      app.addHook('onClose', () => closeRedisClient(client))
    }
  },
  { name: 'redis' },
)
