/**
 * The group_aggregates migration fills GroupHourly and GroupDaily from the links' aggregates stored before it, by
 * the tags and folder the links have then, so that the tag and folder stats of those visits are the same after it.
 */
import t from 'tap'
import { beforeMigration } from '../support/migration-backfill.js'

t.test("the links' aggregates so far, summed by the tags and folder the links have", async (t) => {
  const { db, migrateRest } = await beforeMigration(t, '_group_aggregates')

  // Link 1: one tag twice (in two spellings) and folder 1; link 2: tagKeys NULL, no folder; link 3: the same tag,
  // in a link of its own on the same domain; link 4: in another workspace, the same tag.
  await db.exec(`
    INSERT INTO "Workspace" ("id", "name") VALUES (1, 'old'), (2, 'other');
    INSERT INTO "Folder" ("id", "workspaceId", "name") VALUES (1, 1, 'F');
    INSERT INTO "Link" ("uniq", "workspaceId", "domain", "slug", "slugKey", "url", "tags", "tagKeys", "folderId", "updatedAt") VALUES
      (1, 1, 'go.old.test', 'a', 'a', 'https://example.com/', ARRAY['Summer', 'summer'], ARRAY['summer', 'summer'], 1, now()),
      (2, 1, 'go.old.test', 'b', 'b', 'https://example.com/', NULL, NULL, NULL, now()),
      (3, 1, 'go.old.test', 'c', 'c', 'https://example.com/', ARRAY['summer'], ARRAY['summer'], NULL, now()),
      (4, 2, 'go.other.test', 'd', 'd', 'https://example.com/', ARRAY['summer'], ARRAY['summer'], NULL, now());
    INSERT INTO "analytics"."LinkHourly" ("linkUniq", "dimension", "hour", "value", "clicks", "visitors", "bots") VALUES
      (1, 'total', '2030-01-01T10:00:00Z', '', 3, 2, 1),
      (1, 'country', '2030-01-01T10:00:00Z', 'US', 3, 2, 1),
      (2, 'total', '2030-01-01T10:00:00Z', '', 5, 5, 0),
      (3, 'total', '2030-01-01T10:00:00Z', '', 1, 1, 0),
      (3, 'total', '2030-01-01T11:00:00Z', '', 2, 1, 0),
      (4, 'total', '2030-01-01T10:00:00Z', '', 7, 7, 0);
    INSERT INTO "analytics"."LinkDaily" ("linkUniq", "dimension", "day", "value", "clicks", "visitors", "bots") VALUES
      (1, 'total', '2030-01-01T00:00:00Z', '', 3, 2, 1),
      (1, 'country', '2030-01-01T00:00:00Z', 'US', 3, 2, 1),
      (2, 'total', '2030-01-01T00:00:00Z', '', 5, 5, 0),
      (3, 'total', '2030-01-01T00:00:00Z', '', 3, 2, 0),
      (4, 'total', '2030-01-01T00:00:00Z', '', 7, 7, 0);`)
  await migrateRest()

  const rows = async (table: string, time: string) =>
    (
      await db.query<unknown[]>(
        `SELECT "workspaceId", "groupKind", "groupValue", "dimension", to_char("${time}" AT TIME ZONE 'UTC', 'DD HH24') AS "at",
                "domain", "value", "clicks", "visitors", "bots"
         FROM "analytics"."${table}" ORDER BY 1, 2, 3, 4, 5, 6, 7`,
        [],
        { rowMode: 'array' },
      )
    ).rows
  t.same(await rows('GroupHourly', 'hour'), [
    [1, 'folder', '1', 'country', '01 10', 'go.old.test', 'US', 3, 2, 1],
    [1, 'folder', '1', 'link', '01 10', 'go.old.test', '1', 3, 2, 1],
    [1, 'folder', '1', 'total', '01 10', 'go.old.test', '', 3, 2, 1],
    [1, 'tag', 'summer', 'country', '01 10', 'go.old.test', 'US', 3, 2, 1],
    [1, 'tag', 'summer', 'link', '01 10', 'go.old.test', '1', 3, 2, 1],
    [1, 'tag', 'summer', 'link', '01 10', 'go.old.test', '3', 1, 1, 0],
    [1, 'tag', 'summer', 'link', '01 11', 'go.old.test', '3', 2, 1, 0],
    [1, 'tag', 'summer', 'total', '01 10', 'go.old.test', '', 4, 3, 1],
    [1, 'tag', 'summer', 'total', '01 11', 'go.old.test', '', 2, 1, 0],
    [2, 'tag', 'summer', 'link', '01 10', 'go.other.test', '4', 7, 7, 0],
    [2, 'tag', 'summer', 'total', '01 10', 'go.other.test', '', 7, 7, 0],
  ])
  t.same(await rows('GroupDaily', 'day'), [
    [1, 'folder', '1', 'country', '01 00', 'go.old.test', 'US', 3, 2, 1],
    [1, 'folder', '1', 'link', '01 00', 'go.old.test', '1', 3, 2, 1],
    [1, 'folder', '1', 'total', '01 00', 'go.old.test', '', 3, 2, 1],
    [1, 'tag', 'summer', 'country', '01 00', 'go.old.test', 'US', 3, 2, 1],
    [1, 'tag', 'summer', 'link', '01 00', 'go.old.test', '1', 3, 2, 1],
    [1, 'tag', 'summer', 'link', '01 00', 'go.old.test', '3', 3, 2, 0],
    [1, 'tag', 'summer', 'total', '01 00', 'go.old.test', '', 6, 4, 1],
    [2, 'tag', 'summer', 'link', '01 00', 'go.other.test', '4', 7, 7, 0],
    [2, 'tag', 'summer', 'total', '01 00', 'go.other.test', '', 7, 7, 0],
  ])
})
