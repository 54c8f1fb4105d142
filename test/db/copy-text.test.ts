/**
 * Rows written by COPY (src/db/copy-text.ts, Database.transaction's copyIn) come back exactly as they were, on
 * PostgreSQL and on the embedded database: text with COPY's special characters, NULL, booleans, numbers.
 */
import t from 'tap'
import { copyField } from '../../src/db/copy-text.js'
import { openTestDatabase } from '../support/test-app.js'

type CopyValue = string | number | boolean | null
/** Rows as COPY's text: the values as the visits' rows write them (numbers and flags as they are), texts by copyField. */
const copyValue = (value: CopyValue) => (value === null ? '\\N' : typeof value === 'boolean' ? (value ? 't' : 'f') : copyField(String(value)))
const copyText = (rows: CopyValue[][]) => rows.map((row) => row.map(copyValue).join('\t') + '\n').join('')

t.test('copyField (in rows): tab between values, newline after rows, \\N for NULL, special characters escaped', async (t) => {
  t.equal(copyText([['a', 1, true, null], ['b', 2.5, false, 'x']]), 'a\t1\tt\t\\N\nb\t2.5\tf\tx\n')
  t.equal(copyText([['tab\there', 'new\nline', 'back\\slash', 'cr\rhere', '\\N']]), 'tab\\there\tnew\\nline\tback\\\\slash\tcr\\rhere\t\\\\N\n')
  t.equal(copyText([]), '')
})

t.test('what COPY stores is what was given', async (t) => {
  const { database } = await openTestDatabase(t)
  await database.sql(`CREATE TABLE "CopyProbe" ("n" int, "text" text, "flag" boolean, "at" timestamptz)`)
  const texts = ['plain', 'tab\there', 'new\nline', 'back\\slash', 'cr\rhere', '\\N', 'ünïcødé ✓', 'https://example.com/?a=1&b=2#x', '']
  const at = new Date(Date.UTC(2031, 2, 1, 10, 30, 0, 123))
  await database.transaction(async (_query, copyIn) => {
    await copyIn(
      `COPY "CopyProbe" ("n", "text", "flag", "at") FROM STDIN`,
      copyText([...texts.map((text, n) => [n, text, n % 2 === 0, at.toISOString()]), [99, null, null, null]]),
    )
  })
  const rows = await database.sql<{ n: number; text: string | null; flag: boolean | null; at: Date | null }>(`SELECT * FROM "CopyProbe" ORDER BY "n"`)
  t.same(rows.map((row) => row.text), [...texts, null])
  t.same(rows.map((row) => row.flag), [...texts.map((_, n) => n % 2 === 0), null])
  t.same(rows.slice(0, -1).map((row) => new Date(row.at!).toISOString()), texts.map(() => at.toISOString()), 'instants to the millisecond')

  // A COPY that fails rolls its transaction back, as a statement would.
  await t.rejects(database.transaction(async (_query, copyIn) => {
    await copyIn(`COPY "CopyProbe" ("n", "text") FROM STDIN`, copyText([[100, 'kept?'], ['not a number', 'x']]))
  }))
  t.same(await database.sql(`SELECT "n" FROM "CopyProbe" WHERE "n" = 100`), [], 'nothing of it stored')
  t.same(await database.sql(`SELECT 1 AS "one"`), [{ one: 1 }], 'and the database goes on')
})
