import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Database } from '../db/database.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Database
  }
}

/** Makes the opened database available as `app.db` and closes it when the app closes. */
export default fp(
  async function database(app: FastifyInstance, options: { database: Database; closeWithApp: boolean }) {
    app.decorate('db', options.database)
    if (options.closeWithApp) app.addHook('onClose', async () => options.database.close())
  },
  { name: 'database' },
)
