/**
 * SIGTERM right after a burst of visits: the server writes every buffered visit before it exits (the buffer is
 * written once a second, so without the flush on close up to a second of visits would be lost).
 */
import { once } from 'node:events'
import { Agent, request } from 'node:http'
import t, { type Test } from 'tap'
import type { Database } from '../../src/db/database.js'
import { Prisma } from '../../src/generated/prisma/client.js'
import { holdRowLock } from '../support/row-lock.js'
import { startServer } from '../support/server-process.js'
import { createWorkspaceToken, openTestDatabase } from '../support/test-app.js'

const VISITS = 400

/** A server with one link; `visits` visits of it, then SIGTERM. Resolves to what a check of the result needs. */
async function burstThenStop(t: Test, duringClose?: (database: Database) => Promise<() => Promise<void>>) {
  const { database, url } = await openTestDatabase(t)
  await createWorkspaceToken(database.prisma, { workspace: 'burst', domains: ['go.burst.test'] })
  const [{ workspaceId }] = await database.prisma.$queryRawUnsafe<{ workspaceId: number }[]>(`SELECT "id" AS "workspaceId" FROM "Workspace" WHERE "name" = 'burst'`)
  const [{ uniq }] = await database.prisma.$queryRawUnsafe<{ uniq: number }[]>(
    `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt")
     VALUES ($1, 'go.burst.test', 'burst', 'burst', 'https://example.com/burst', now()) RETURNING "uniq"`,
    workspaceId,
  )
  const server = await startServer({ DATABASE_URL: url! })
  const agent = new Agent({ keepAlive: true, maxSockets: 20 })
  const visitOnce = (i: number) =>
    new Promise<number>((resolve, reject) => {
      const req = request({ port: server.port, host: '127.0.0.1', path: `/burst?i=${i}`, agent, headers: { host: 'go.burst.test', 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0' } }, (res) => {
        res.resume()
        resolve(res.statusCode!)
      })
      req.on('error', reject)
      req.end()
    })
  const statuses = await Promise.all(Array.from({ length: VISITS }, (_, i) => visitOnce(i)))
  agent.destroy()
  t.same(new Set(statuses), new Set([302]), `${VISITS} visits redirected`)

  const after = await duringClose?.(database)
  const exited = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  await after?.()
  const [code] = await exited
  t.equal(code, 0, 'a clean exit')
  const [{ count }] = await database.prisma.$queryRawUnsafe<{ count: number }[]>(
    `SELECT count(*)::int AS "count" FROM "analytics"."Visit" WHERE "linkUniq" = $1`,
    uniq,
  )
  t.equal(count, VISITS, 'every visit stored')
  return server.output()
}

const needsPostgres = { skip: !process.env.DATABASE_URL && 'needs DATABASE_URL (the embedded database is one process\'s)' }

t.test('every visit of a burst is stored when the server stops', needsPostgres, async (t) => {
  t.match(await burstThenStop(t), /visits/, 'the server said what it wrote')
})

t.test('the buffer is written while another instance\'s rollup holds the batches up for 7 s of the close', needsPostgres, async (t) => {
  // A rollup of a busy minute holds the rollup row for seconds, and a batch waits for it to commit: longer than
  // the 3 s the close gives a database that fails its writes, within what it gives one that only makes them wait.
  const output = await burstThenStop(t, async (database) => {
    const rollup = await holdRowLock(database.prisma, Prisma.sql`SELECT 1 FROM "analytics"."Rollup" FOR UPDATE`)
    return async () => {
      // Past the 6 s at which the close ends the database connections of requests still going (there are none).
      await new Promise((resolve) => setTimeout(resolve, 7_000))
      await rollup.release()
    }
  })
  t.match(output, /the buffered visits are written/)
})
