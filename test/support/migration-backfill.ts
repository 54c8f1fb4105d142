/**
 * For tests of a migration that fixes or fills rows stored before it: an in-memory database migrated up to just
 * before that migration, to put the old rows in, and a way to run it and the rest. The migration SQL is the same
 * for PGlite and PostgreSQL, so an in-memory database is enough.
 */
import { PGlite } from '@electric-sql/pglite'
import { applyMigrations, readMigrations, type SqlRunner } from '../../src/db/migrate.js'

interface Teardown {
  teardown(fn: () => unknown): void
  ok(value: unknown, message: string): void
}

/** `suffix`: the end of the migration's name (`_link_list`). */
export async function beforeMigration(t: Teardown, suffix: string): Promise<{ db: PGlite; migrateRest: () => Promise<void> }> {
  const db = new PGlite()
  t.teardown(() => db.close())
  const runner: SqlRunner = {
    query: async (sql, params = []) => (await db.query<Record<string, unknown>>(sql, params)).rows,
    exec: async (sql) => {
      await db.exec(sql)
    },
  }
  const migrations = readMigrations()
  const index = migrations.findIndex((migration) => migration.name.endsWith(suffix))
  t.ok(index > 0, `the migration ${suffix} exists`)
  await applyMigrations(runner, migrations.slice(0, index))
  return { db, migrateRest: async () => void (await applyMigrations(runner, migrations)) }
}
