/**
 * The workspace_link_visitors migration: the workspace's top-link rows (dimension 'link') stored before it count
 * each link's own unique visitors afterwards, taken from the link's own totals; every other row is left alone.
 */
import t from 'tap'
import { beforeMigration } from '../support/migration-backfill.js'

t.test("the top-link rows take the links' own visitors; nothing else changes", async (t) => {
  const { db, migrateRest } = await beforeMigration(t, '_workspace_link_visitors')

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
  await migrateRest()

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
