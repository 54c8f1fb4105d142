/**
 * The settings every session of the service's pools starts with (src/db/database.ts, SESSION_OPTIONS): what the
 * answers depend on (UTC), and what bounds the harm of a client that vanished mid-transaction.
 */
import t from 'tap'
import { openTestDatabase } from '../support/test-app.js'

t.test('every session, the API\'s and the visitors\': UTC, no JIT, and an idle transaction ended after 15 s', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { database } = await openTestDatabase(t)
  const settings = `SELECT current_setting('TimeZone') AS "zone", current_setting('jit') AS "jit",
    current_setting('idle_in_transaction_session_timeout') AS "idle"`
  const expected = [{ zone: 'UTC', jit: 'off', idle: '15s' }]
  t.same(await database.sql(settings), expected, "the API's pool")
  t.same(await database.query(settings), expected, "the visitors' pool")
  t.same(await database.transaction((query) => query(settings)), expected, 'a transaction')
})
