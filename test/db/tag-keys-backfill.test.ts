/** The link_list migration fills tagKeys for the links stored before it, so the tag filter finds them too. */
import { PGlite } from '@electric-sql/pglite'
import t from 'tap'
import { applyMigrations, readMigrations, type SqlRunner } from '../../src/db/migrate.js'

t.test('links stored before the migration get their lower-case tags', async (t) => {
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
  const index = migrations.findIndex((migration) => migration.name.endsWith('_link_list'))
  t.ok(index > 0, 'the migration exists')
  await applyMigrations(runner, migrations.slice(0, index))

  await db.exec(`
    INSERT INTO "Workspace" ("name") VALUES ('old');
    INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "tags", "updatedAt") VALUES
      (1, 'go.old.test', 'a', 'a', 'https://example.com/', ARRAY['Summer', 'EMAIL'], now()),
      (1, 'go.old.test', 'b', 'b', 'https://example.com/', ARRAY[]::text[], now()),
      (1, 'go.old.test', 'c', 'c', 'https://example.com/', NULL, now());`)
  await applyMigrations(runner, migrations)

  const { rows } = await db.query('SELECT "slug", "tags", "tagKeys" FROM "Link" ORDER BY "slug"')
  t.same(rows, [
    { slug: 'a', tags: ['Summer', 'EMAIL'], tagKeys: ['summer', 'email'] },
    { slug: 'b', tags: [], tagKeys: [] },
    { slug: 'c', tags: null, tagKeys: [] },
  ])
})
