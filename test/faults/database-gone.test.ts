/**
 * A database server that answers but will not let the service in: its database dropped or renamed (3D000), closed
 * to connections (55000), or the role gone or refused (class 28, CONNECT revoked). Every API answer is the 503 of a database out of reach, with Retry-After, as
 * /readyz says; never a 500. Once the database is back, the service answers again by itself.
 */
import pg from 'pg'
import t from 'tap'
import { buildApp } from '../../src/app.js'
import { openDatabase } from '../../src/db/database.js'
import { RETRY_AFTER_UNAVAILABLE_SECONDS } from '../../src/errors/app-error.js'
import { apiClient } from '../support/api-client.js'
import { buildTestApp, client, createWorkspaceToken, json, openTestDatabase, testAutofill, testConfig } from '../support/test-app.js'
import { acmeWorkspace, visit } from '../redirects/visit-support.js'

const serverUrl = process.env.DATABASE_URL
const needsServer = { skip: !serverUrl && 'needs DATABASE_URL (the embedded database has no server to refuse it)' }

t.test('the database renamed away while the service runs: 503 with Retry-After, then answers again once it is back', needsServer, async (t) => {
  const { database, url } = await openTestDatabase(t)
  const { app } = await buildTestApp(t, { database })
  const token = await createWorkspaceToken(database.prisma, { workspace: 'gone', defaultDomain: 'go.gone.test' })
  const link = json(await client(app, token).create({ url: 'https://example.com/gone' }, { autofill: false }))
  const name = new URL(url!).pathname.slice(1)
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  t.teardown(() => admin.end())
  const rename = async (from: string, to: string) => {
    // The service's pools reconnect at once: end their sessions until the rename finds none.
    for (let tries = 0; ; tries++) {
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [from])
      try {
        await admin.query(`ALTER DATABASE "${from}" RENAME TO "${to}"`)
        return
      } catch (error) {
        if ((error as { code?: string }).code !== '55006' || tries > 50) throw error
      }
    }
  }
  await rename(name, `${name}_away`)
  let renamedBack = false
  t.teardown(async () => {
    if (!renamedBack) await rename(`${name}_away`, name)
  })

  for (const response of [await apiClient(app, token).get(`/v1/links/${link.uniq}`), await client(app, token).create({ url: 'https://example.com/x' }, { autofill: false })]) {
    t.equal(response.statusCode, 503, response.body)
    t.equal(response.headers['retry-after'], String(RETRY_AFTER_UNAVAILABLE_SECONDS))
    t.match(json(response), { code: 'unavailable' })
  }
  const ready = await app.inject('/readyz')
  t.equal(ready.statusCode, 503)

  await rename(`${name}_away`, name)
  renamedBack = true
  const again = await apiClient(app, token).get(`/v1/links/${link.uniq}`)
  t.equal(again.statusCode, 200, 'answers again, no restart')
})

t.test('the database closed to connections (ALLOW_CONNECTIONS false, 55000): 503 for the API and a cold visit, then answers again', needsServer, async (t) => {
  const { database, url } = await openTestDatabase(t)
  const testApp = await buildTestApp(t, { database })
  const { token, link } = await acmeWorkspace(testApp)
  const created = await link({ id: 'closed-cold' })
  const name = new URL(url!).pathname.slice(1)
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  const allow = (allowed: boolean) => admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS ${allowed}`)
  t.teardown(async () => {
    await allow(true)
    await admin.end()
  })
  await allow(false)
  await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name])

  const answers = [await visit(testApp.app, '/closed-cold'), await apiClient(testApp.app, token).get(`/v1/links/${created.uniq}`), await apiClient(testApp.app, token).get('/v1/links')]
  for (const response of answers) {
    t.equal(response.statusCode, 503, response.body)
    t.equal(response.headers['retry-after'], String(RETRY_AFTER_UNAVAILABLE_SECONDS))
  }
  await allow(true)
  t.equal((await visit(testApp.app, '/closed-cold')).statusCode, 302, 'visitors served again, no restart')
})

t.test('CONNECT revoked from the service\'s role (42501, FATAL): 503 with Retry-After, not 500', needsServer, async (t) => {
  const { database, url } = await openTestDatabase(t)
  const name = new URL(url!).pathname.slice(1)
  const role = `${name}_service`
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  t.teardown(() => admin.end())
  await admin.query(`CREATE ROLE "${role}" LOGIN`)
  await admin.query(`GRANT USAGE ON SCHEMA public, analytics TO "${role}"`)
  await admin.query(`GRANT ALL ON ALL TABLES IN SCHEMA public, analytics TO "${role}"`)
  await admin.query(`GRANT ALL ON ALL SEQUENCES IN SCHEMA public, analytics TO "${role}"`)
  const asRole = new URL(url!)
  asRole.username = role
  const restricted = await openDatabase({ databaseUrl: asRole.toString(), dataDir: 'unused', migrate: false })
  const app = await buildApp({ config: testConfig(), database: restricted, closeDatabase: true, logger: false, autofill: testAutofill() })
  t.teardown(async () => {
    await app.close()
    // The role goes with the database's teardown's DROP only once it owns and holds nothing.
    const cleanup = new pg.Client({ connectionString: serverUrl })
    await cleanup.connect()
    await cleanup.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role])
    await cleanup.end()
    await admin.query(`GRANT CONNECT ON DATABASE "${name}" TO PUBLIC`)
    await admin.query(`DROP OWNED BY "${role}"`)
    await admin.query(`DROP ROLE "${role}"`)
  })
  const token = await createWorkspaceToken(database.prisma, { workspace: 'revoked', defaultDomain: 'go.revoked.test' })
  t.equal((await apiClient(app, token).get('/v1/links')).statusCode, 200, 'the role can work')
  await admin.query(`REVOKE CONNECT ON DATABASE "${name}" FROM PUBLIC, "${role}"`)
  await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role])
  const response = await apiClient(app, token).get('/v1/links')
  t.equal(response.statusCode, 503, response.body)
  t.equal(response.headers['retry-after'], String(RETRY_AFTER_UNAVAILABLE_SECONDS))
  t.match(json(response), { code: 'unavailable' })
})

t.test('a role the server does not know (28000): 503 with Retry-After, not 500', needsServer, async (t) => {
  const url = new URL(serverUrl!)
  url.username = 'no_such_role_here'
  const refused = await openDatabase({ databaseUrl: url.toString(), dataDir: 'unused', migrate: false })
  const app = await buildApp({ config: testConfig(), database: refused, closeDatabase: true, logger: false, autofill: testAutofill() })
  t.teardown(() => app.close())
  const response = await client(app, 'sl_anything').create({ url: 'https://example.com/' })
  t.equal(response.statusCode, 503, response.body)
  t.equal(response.headers['retry-after'], String(RETRY_AFTER_UNAVAILABLE_SECONDS))
  t.match(json(response), { code: 'unavailable' })
})
