/**
 * `app.visits`: where the visitor routes hand each visit (src/redirects/visits.ts). The service's recorder
 * buffers them and writes batches (src/analytics/visit-recorder.ts); this plugin also keeps the monthly
 * partitions ahead of time and drops those past VISIT_RETENTION_DAYS, at start and every six hours, and writes
 * what is buffered when the app closes (before the database closes: onClose hooks run in reverse order).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'
import { createPartitionsAhead, dropExpired } from '../analytics/partitions.js'
import { BufferedVisitRecorder, type VisitBufferOptions } from '../analytics/visit-recorder.js'
import { storeVisits } from '../analytics/visit-store.js'
import { VisitorKeys } from '../analytics/visitor-key.js'
import type { VisitRecorder } from '../redirects/visits.js'

const MAINTENANCE_EVERY_MS = 6 * 3600_000

export interface VisitPluginOptions {
  /** Another recorder instead of the database one (tests). */
  recorder?: VisitRecorder
  buffer?: VisitBufferOptions
  /** Prepended to Redis keys (tests use one per run). */
  keyPrefix?: string
  /** The clock of partition maintenance (tests). */
  now?: () => number
}

declare module 'fastify' {
  interface FastifyInstance {
    visits: VisitRecorder
    /** The database recorder, when it is the one in use (its counts: recorded, stored, dropped…). */
    visitRecorder: BufferedVisitRecorder | null
  }
}

export default fp(
  async function visits(app: FastifyInstance, options: { config: Config } & VisitPluginOptions) {
    if (options.recorder) {
      app.decorate('visits', options.recorder)
      app.decorate('visitRecorder', null)
      return
    }
    const prisma = app.db.prisma
    const now = options.now ?? Date.now
    let warned = false
    const keys = new VisitorKeys({
      redis: app.redis,
      keyPrefix: options.keyPrefix,
      onFallback: (error) => {
        if (!warned) app.log.warn({ err: error }, 'visits: Redis did not give the day\'s visitor key; this instance uses its own')
        warned = true
      },
    })
    const recorder = new BufferedVisitRecorder((batch) => storeVisits(app.db, batch), keys, app.log, options.buffer)
    app.decorate('visits', recorder)
    app.decorate('visitRecorder', recorder)

    const maintain = async () => {
      try {
        const at = new Date(now())
        await createPartitionsAhead(prisma, at)
        const dropped = await dropExpired(prisma, at, options.config.visitRetentionDays)
        if (dropped.length > 0) app.log.info({ dropped }, 'visits: partitions past the retention dropped')
      } catch (error) {
        app.log.warn({ err: error }, 'visits: partition maintenance failed; tried again later')
      }
    }
    let timer: NodeJS.Timeout | null = null
    app.addHook('onReady', async () => {
      await maintain()
      timer = setInterval(() => void maintain(), MAINTENANCE_EVERY_MS).unref()
      recorder.start()
    })
    app.addHook('onClose', async () => {
      if (timer) clearInterval(timer)
      await recorder.close()
    })
  },
  { name: 'visits', dependencies: ['database', 'redis'] },
)
