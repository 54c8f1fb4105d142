/**
 * A PostgreSQL server whose default time zone is not UTC (initdb takes the machine's): the service's sessions
 * are UTC all the same, so a link's visits list their instants as stored and the stats cut UTC days and hours.
 */
import t from 'tap'
import pg from 'pg'
import { storeVisits } from '../../src/analytics/visit-store.js'
import { openDatabase } from '../../src/db/database.js'
import { apiClient } from '../support/api-client.js'
import { createScratchDatabase } from '../support/scratch-database.js'
import { buildTestApp, createWorkspaceToken } from '../support/test-app.js'
import { storedVisit } from './stored-visit.js'

const serverUrl = process.env.DATABASE_URL
if (!serverUrl) {
  t.pass('the embedded database runs in UTC; the server zone matters only with DATABASE_URL')
} else {
  const { url, drop } = await createScratchDatabase(serverUrl, 'test_zone')
  t.teardown(drop)
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  // Half past the hour, and thirteen hours and three quarters ahead: nothing lines up with UTC by chance.
  await admin.query(`ALTER DATABASE "${new URL(url).pathname.slice(1)}" SET timezone = 'Pacific/Chatham'`)
  await admin.end()
  const database = await openDatabase({ databaseUrl: url, dataDir: 'unused' })
  t.teardown(() => database.close())
  const { app, prisma } = await buildTestApp(t, { database, env: { VISIT_RETENTION_DAYS: '36500' } })
  const token = await createWorkspaceToken(prisma, { workspace: 'zoned', defaultDomain: 'go.zoned.test' })
  const api = apiClient(app, token)
  const link = await api.link({ url: 'https://example.com/zoned', id: 'zoned' })
  await storeVisits(database, [storedVisit(link, '2026-03-10T10:15:00.123Z', 1), storedVisit(link, '2026-03-10T23:30:00Z', 2)])

  t.test("the visits' instants are the stored ones", async (t) => {
    const response = await api.get(`/v1/links/${link.uniq}/visits`)
    t.equal(response.statusCode, 200)
    t.same(response.json().visits.map((visit: { at: string }) => visit.at), ['2026-03-10T23:30:00.000Z', '2026-03-10T10:15:00.123Z'])
  })

  t.test('the stats count UTC days and hours', async (t) => {
    const daily = (await api.get(`/v1/links/${link.uniq}/stats?from=2026-03-10T00:00:00Z&to=2026-03-12T00:00:00Z`)).json()
    t.same(daily.series.map((bucket: { start: string; clicks: number }) => [bucket.start, bucket.clicks]), [
      ['2026-03-10T00:00:00+00:00', 2],
      ['2026-03-11T00:00:00+00:00', 0],
    ])
    const hourly = (await api.get(`/v1/links/${link.uniq}/stats?from=2026-03-10T10:00:00Z&to=2026-03-10T12:00:00Z&interval=hour`)).json()
    t.same(hourly.series.map((bucket: { start: string; clicks: number }) => [bucket.start, bucket.clicks]), [
      ['2026-03-10T10:00:00+00:00', 1],
      ['2026-03-10T11:00:00+00:00', 0],
    ])
  })
}
