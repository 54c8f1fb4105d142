/**
 * The API's hottest statements are prepared on PostgreSQL (src/db/database.ts, preparedName): planned once per
 * connection instead of on every request. What matters to a user is that the answers stay the same once
 * PostgreSQL switches a prepared statement to its generic plan (from the sixth execution), and that the number
 * of texts kept per connection stays bounded.
 */
import t from 'tap'
import { MAX_PREPARED_TEXTS, preparedName } from '../../src/db/database.js'
import { findLinkByUniq, findLinksPage } from '../../src/links/link-repository.js'
import { loadRedirectViews } from '../../src/redirects/redirect-view.js'
import { createWorkspaceToken, openTestDatabase } from '../support/test-app.js'

t.test('a link read by a prepared statement: each read answers its own link and clicks, through the generic plan too', { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' }, async (t) => {
  const { database } = await openTestDatabase(t)
  await createWorkspaceToken(database.prisma, { workspace: 'prepared', domains: ['go.prepared.test'] })
  const [{ id: workspaceId }] = await database.sql<{ id: number }>(`SELECT "id" FROM "Workspace" WHERE "name" = 'prepared'`)
  const links = await database.sql<{ uniq: number; slug: string }>(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt")
     SELECT $1, 'go.prepared.test', 'p' || g, 'p' || g, 'https://example.com/' || g, now() FROM generate_series(1, 10) g
     RETURNING "uniq", "slug"`,
    [workspaceId],
  )
  await database.sql(`INSERT INTO "analytics"."LinkClicks" ("linkUniq", "clicks") SELECT unnest($1::int[]), unnest($2::bigint[])`, [
    links.map((link) => link.uniq),
    links.map((_, index) => index * 10),
  ])
  // Ten reads one after the other: the pool hands the same connection back each time, which PostgreSQL plans
  // for the statement's first five executions and then runs on its generic plan.
  for (const [index, link] of links.entries()) {
    const found = await findLinkByUniq(database, workspaceId, link.uniq)
    t.match(found, { uniq: link.uniq, slug: link.slug, url: `https://example.com/${link.slug.slice(1)}`, clicks: index * 10 }, `read ${index + 1}`)
  }
  t.equal(await findLinkByUniq(database, workspaceId + 1, links[0].uniq), null, "another workspace's link is not found")
  const prepared = await database.sql<{ statement: string; generic_plans: string }>(
    `SELECT "statement", "generic_plans" FROM pg_prepared_statements WHERE "statement" LIKE '%FROM "Link" l WHERE l."uniq" = $1 AND l."workspaceId" = $2'`,
  )
  t.equal(prepared.length, 1, 'the read is a prepared statement of the connection')
  t.ok(Number(prepared[0]?.generic_plans) > 0, 'and it ran on its generic plan')

  // The list's unfiltered page and the visitors' read of a batch of keys: kept plans too, each answer its own.
  const newestFirst = links.map((link) => link.uniq).reverse()
  for (let run = 1; run <= 8; run++) {
    const page = await findLinksPage(database, { workspaceId, beforeUniq: newestFirst[run - 1] }, 3)
    t.same(page.map((link) => link.uniq), newestFirst.slice(run, run + 3), `page ${run}`)
    const keys = [links[run].slug, 'nobody', links[run + 1].slug].map((slugKey) => ({ domain: 'go.prepared.test', slugKey }))
    t.same([...(await loadRedirectViews(database, keys)).values()].map((view) => view.slug).sort(), [links[run].slug, links[run + 1].slug].sort(), `views ${run}`)
  }
  const kept = await database.sql<{ generic_plans: string }>(
    `SELECT "generic_plans" FROM pg_prepared_statements WHERE "statement" LIKE '%ANY(ARRAY[$1::int])%'`,
  )
  t.ok(kept.length === 1 && Number(kept[0].generic_plans) > 0, 'the page ran on its kept plan')
})

t.test(
  'a migration that changes the type of a column the prepared statements return (a rolling deploy) fails no request of the running release',
  { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL' },
  async (t) => {
    const { database } = await openTestDatabase(t)
    await createWorkspaceToken(database.prisma, { workspace: 'stale', domains: ['go.stale.test'] })
    const [{ id: workspaceId }] = await database.sql<{ id: number }>(`SELECT "id" FROM "Workspace" WHERE "name" = 'stale'`)
    const [{ uniq }] = await database.sql<{ uniq: number }>(
      `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt")
       VALUES ($1, 'go.stale.test', 'summer', 'summer', 'https://example.com/summer', now()) RETURNING "uniq"`,
      [workspaceId],
    )
    const key = { domain: 'go.stale.test', slugKey: 'summer' }
    const readEverywhere = () =>
      Promise.all(
        Array.from({ length: 6 }, async () => ({
          link: await findLinkByUniq(database, workspaceId, uniq),
          view: (await loadRedirectViews(database, [key])).get('go.stale.test/summer'),
          views: await loadRedirectViews(database, [key, { domain: 'go.stale.test', slugKey: 'nobody' }, key]),
          page: await findLinksPage(database, { workspaceId }, 21),
          inTransaction: await database.transaction((query) => query<{ url: string }>(`SELECT "url" FROM "Link" WHERE "uniq" = $1`, [uniq], 'prepared')),
        })),
      )
    // Several connections of both pools prepare the statements…
    for (const read of await readEverywhere()) t.ok(read.link && read.view && read.inTransaction.length === 1, 'read before the migration')
    // …then the next release's migration changes the type of a column they all return.
    await database.sql(`ALTER TABLE "Link" ALTER COLUMN "url" TYPE varchar(4096)`)
    const reads = await readEverywhere()
    for (const read of reads) {
      t.equal(read.link?.url, 'https://example.com/summer', 'the API read answers')
      t.match(read.view, { uniq, slug: 'summer' }, "the visitors' read answers")
      t.same([...read.views.keys()], ['go.stale.test/summer'], "and that of several keys")
      t.same(read.page.map((link) => link.url), ['https://example.com/summer'], "the list's page answers")
      t.same(read.inTransaction, [{ url: 'https://example.com/summer' }], 'a statement in a transaction answers')
    }
    const stale = await database.sql<{ count: string }>(
      `SELECT count(*) FROM pg_prepared_statements WHERE "statement" LIKE '%FROM "Link" l WHERE l."uniq" = $1 AND l."workspaceId" = $2'`,
    )
    t.ok(Number(stale[0].count) >= 1, 'the read is still a prepared statement (under its new name)')
  },
)

// Last: it uses up the names this process may give.
t.test('one name per text, and no more than MAX_PREPARED_TEXTS texts get one', async (t) => {
  const first = preparedName('SELECT 1 AS "probe"')
  t.type(first, 'string')
  t.equal(preparedName('SELECT 1 AS "probe"'), first, 'the same text, the same name')
  t.not(preparedName('SELECT 2 AS "probe"'), first, 'another text, another name')
  const names = new Set<string>()
  for (let i = 0; i < MAX_PREPARED_TEXTS * 2; i++) {
    const name = preparedName(`SELECT ${i} AS "bound"`)
    if (name !== undefined) names.add(name)
  }
  t.ok(names.size < MAX_PREPARED_TEXTS, 'the texts beyond the bound run unprepared')
  t.equal(preparedName(`SELECT ${MAX_PREPARED_TEXTS * 3} AS "bound"`), undefined)
  t.equal(preparedName('SELECT 1 AS "probe"'), first, 'a text with a name keeps it')
})
