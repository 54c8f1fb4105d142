/** What a request sends to the database about links: for tests that count the statements of an operation. */
import type { Database } from '../../src/db/database.js'

/**
 * Records, until the test ends, the first three words of each plain-SQL statement that names the links' table
 * (`UPDATE "Link" AS`, `DELETE FROM "Link"`), and `transaction` for each transaction begun.
 */
export function linkStatements(t: { teardown(fn: () => unknown): void }, database: Database): string[] {
  const sent: string[] = []
  const { sql, transaction } = database
  database.sql = (text, params, prepared) => {
    if (text.includes('"Link"')) sent.push(text.trim().split(/\s+/).slice(0, 3).join(' '))
    return sql(text, params, prepared)
  }
  database.transaction = (work, options) => {
    sent.push('transaction')
    return transaction(work, options)
  }
  t.teardown(() => Object.assign(database, { sql, transaction }))
  return sent
}
