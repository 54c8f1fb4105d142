/** The link_list migration fills tagKeys for the links stored before it, so the tag filter finds them too. */
import t from 'tap'
import { beforeMigration } from '../support/migration-backfill.js'

t.test('links stored before the migration get their lower-case tags', async (t) => {
  const { db, migrateRest } = await beforeMigration(t, '_link_list')

  await db.exec(`
    INSERT INTO "Workspace" ("name") VALUES ('old');
    INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "tags", "updatedAt") VALUES
      (1, 'go.old.test', 'a', 'a', 'https://example.com/', ARRAY['Summer', 'EMAIL'], now()),
      (1, 'go.old.test', 'b', 'b', 'https://example.com/', ARRAY[]::text[], now()),
      (1, 'go.old.test', 'c', 'c', 'https://example.com/', NULL, now());`)
  await migrateRest()

  const { rows } = await db.query('SELECT "slug", "tags", "tagKeys" FROM "Link" ORDER BY "slug"')
  t.same(rows, [
    { slug: 'a', tags: ['Summer', 'EMAIL'], tagKeys: ['summer', 'email'] },
    { slug: 'b', tags: [], tagKeys: [] },
    { slug: 'c', tags: null, tagKeys: [] },
  ])
})
