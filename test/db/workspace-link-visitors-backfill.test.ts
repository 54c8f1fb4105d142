/**
 * The workspace_link_visitors migration: the workspace's top-link rows (dimension 'link') stored before it count
 * each link's own unique visitors afterwards, taken from the link's own totals; every other row is left alone.
 */
import { PGlite } from '@electric-sql/pglite'
import t from 'tap'
import { applyMigrations, readMigrations, type SqlRunner } from '../../src/db/migrate.js'

t.test("the top-link rows take the links' own visitors; nothing else changes", async (t) => {
  // The migration SQL is the same for PGlite and PostgreSQL: an in-memory database is enough.
  const db = new PGlite()
  t.teardown(() => db.close())
  const runner: SqlRunner = {
    query: async (sql, params = []) => (await db.query<Record<string, unknown>>(sql, params)).rows,
    exec: async (sql) => {
      await db.exec(sql)
    },
  }
  const migrations = readMigrations()
  const index = migrations.findIndex((migration) => migration.name.endsWith('_workspace_link_visitors'))
  t.ok(index > 0, 'the migration exists')
  await applyMigrations(runner, migrations.slice(0, index))

  // Link 2's visitor had visited link 1 first that day: the workspace counted them for link 1 only. A country row
  // holding a value that is no number sits beside them (the update must not try to read it as a uniq), and link
  // 3's row has no link row to take from (its rows expired): it stays.
  await db.exec(`
    INSERT INTO "analytics"."LinkHourly" ("linkUniq", "dimension", "hour", "value", "clicks", "visitors", "bots") VALUES
      (1, 'total', '2030-01-01T10:00:00Z', '', 3, 2, 0),
      (2, 'total', '2030-01-01T10:00:00Z', '', 1, 1, 0),
      (2, 'country', '2030-01-01T10:00:00Z', 'US', 1, 1, 0);
    INSERT INTO "analytics"."LinkDaily" ("linkUniq", "dimension", "day", "value", "clicks", "visitors", "bots") VALUES
      (1, 'total', '2030-01-01T00:00:00Z', '', 3, 2, 0),
      (2, 'total', '2030-01-01T00:00:00Z', '', 1, 1, 0);
    INSERT INTO "analytics"."WorkspaceHourly" ("workspaceId", "dimension", "hour", "domain", "value", "clicks", "visitors", "bots") VALUES
      (1, 'total', '2030-01-01T10:00:00Z', 'go.test', '', 4, 2, 0),
      (1, 'country', '2030-01-01T10:00:00Z', 'go.test', 'US', 4, 2, 0),
      (1, 'link', '2030-01-01T10:00:00Z', 'go.test', '1', 3, 2, 0),
      (1, 'link', '2030-01-01T10:00:00Z', 'go.test', '2', 1, 0, 0),
      (1, 'link', '2030-01-01T10:00:00Z', 'go.test', '3', 5, 1, 0);
    INSERT INTO "analytics"."WorkspaceDaily" ("workspaceId", "dimension", "day", "domain", "value", "clicks", "visitors", "bots") VALUES
      (1, 'total', '2030-01-01T00:00:00Z', 'go.test', '', 4, 2, 0),
      (1, 'link', '2030-01-01T00:00:00Z', 'go.test', '1', 3, 2, 0),
      (1, 'link', '2030-01-01T00:00:00Z', 'go.test', '2', 1, 0, 0);`)
  await applyMigrations(runner, migrations)

  const rows = async (table: string) =>
    (await db.query<unknown[]>(`SELECT "dimension", "value", "clicks", "visitors" FROM "analytics"."${table}" ORDER BY 1, 2`, [], { rowMode: 'array' })).rows
  t.same(await rows('WorkspaceHourly'), [
    ['country', 'US', 4, 2],
    ['link', '1', 3, 2],
    ['link', '2', 1, 1],
    ['link', '3', 5, 1],
    ['total', '', 4, 2],
  ])
  t.same(await rows('WorkspaceDaily'), [
    ['link', '1', 3, 2],
    ['link', '2', 1, 1],
    ['total', '', 4, 2],
  ])
})
