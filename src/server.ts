import closeWithGrace from 'close-with-grace'
import { buildApp, loggerOptions } from './app.js'
import { ConfigError, loadConfig } from './config/config.js'
import { openDatabase } from './db/database.js'
import { DataDirInUseError } from './db/data-dir-lock.js'
import { errorText, StartError } from './errors/error-text.js'
import { bootstrapEmbedded, DEV_DOMAIN, DEV_WORKSPACE } from './workspaces/bootstrap.js'

/** Grace period for in-flight requests on SIGTERM/SIGINT before the process exits anyway. */
const SHUTDOWN_GRACE_MS = 10_000
/**
 * The signals that close the server. Under `npm start` (which execs node) npm forwards them to the server, so one
 * sent to the whole process group (Ctrl-C in a terminal, systemd's stop) arrives twice: the same signal once
 * more within DUPLICATE_SIGNAL_MS is that copy, not an operator insisting (which exits at once, as before).
 */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const
const DUPLICATE_SIGNAL_MS = 1000

async function main(): Promise<void> {
  const config = loadConfig()
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }).catch((error: unknown) => {
    if (error instanceof DataDirInUseError) throw error
    const variable = config.databaseUrl ? 'DATABASE_URL' : `DATA_DIR (${config.dataDir})`
    throw new StartError(`Could not start: cannot open the database (${variable}): ${errorText(error)}`)
  })
  const app = await buildApp({ config, database, closeDatabase: true, logger: loggerOptions(config) })

  app.log.info(
    database.kind === 'embedded'
      ? `database: embedded PostgreSQL (PGlite) in ${config.dataDir}; one process at a time, set DATABASE_URL for production`
      : 'database: PostgreSQL from DATABASE_URL',
  )
  if (config.redisUrl) {
    app.log.info('rate limits: counters in Redis (REDIS_URL), shared by every instance of the service')
  } else {
    app.log.warn(
      'rate limits: counters in this process only (REDIS_URL unset): exact for one instance; ' +
        'several instances need REDIS_URL to share the quotas',
    )
  }
  const created = database.kind === 'embedded' ? await bootstrapEmbedded(database.prisma, config) : undefined
  if (created) {
    const domain = created.domain
      ? `default domain ${created.domain}`
      : `no domain of its own: ${DEV_DOMAIN} is in RESERVED_DOMAINS; stop the server and add one with domain:add`
    // Written to the terminal once, never to the log.
    process.stderr.write(
      `\nFirst start on an empty embedded database: created workspace "${DEV_WORKSPACE}" (${domain}).\n` +
        `Its API token, shown only now:\n\n  ${created.token}\n\n`,
    )
  }

  let stopping: { signal: string; at: number; copyIgnored: boolean } | undefined
  let closing = false
  const grace = closeWithGrace({ delay: SHUTDOWN_GRACE_MS, skip: [...STOP_SIGNALS] }, async ({ signal, err }) => {
    closing = true
    if (err) app.log.error({ err }, 'shutting down after an error')
    else app.log.info(`${signal ?? stopping?.signal} received: finishing in-flight requests`)
    await app.close()
  })
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      if (!stopping && !closing) {
        stopping = { signal, at: Date.now(), copyIgnored: false }
        grace.close()
      } else if (stopping && !stopping.copyIgnored && signal === stopping.signal && Date.now() - stopping.at < DUPLICATE_SIGNAL_MS) {
        stopping.copyIgnored = true
        app.log.info(`${signal} again at once: taken for the copy npm forwards; once more exits at once`)
      } else {
        app.log.error(`second ${signal}, exiting`)
        process.exit(1)
      }
    })
  }

  await app.listen({ port: config.port, host: config.host }).catch(async (error: unknown) => {
    // The token printed above would be spent on a start that failed: the next start makes the workspace again
    // and prints a new one, next to its own outcome.
    if (created) await database.prisma.workspace.delete({ where: { name: DEV_WORKSPACE } }).catch(() => {})
    await app.close()
    throw new StartError(`Could not start: cannot listen on HOST ${config.host}, PORT ${config.port}: ${errorText(error)}`)
  })
}

main().catch((error) => {
  if (error instanceof ConfigError || error instanceof DataDirInUseError || error instanceof StartError) {
    console.error(error.message)
  } else {
    console.error('Could not start:', error)
  }
  process.exit(1)
})
