/**
 * For races with a write that is under way: a transaction of the test's own holds rows locked (as a concurrent
 * write would) until released, and a poll tells when the service's statements are waiting for a lock. PostgreSQL
 * only: the embedded database runs one statement at a time.
 */
import type { Database } from '../../src/db/database.js'
import type { Prisma } from '../../src/generated/prisma/client.js'
import { within } from './polling.js'

type PrismaClient = Database['prisma']

type Transaction = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0]

/**
 * Locks the rows `select` reads (a `SELECT … FOR UPDATE`) in a transaction that lasts until release(), which may
 * first write in it (a concurrent write that commits while others wait for its rows).
 */
export async function holdRowLock(
  prisma: PrismaClient,
  select: Prisma.Sql,
): Promise<{ release(write?: (tx: Transaction) => Promise<unknown>): Promise<void> }> {
  let release!: (write?: (tx: Transaction) => Promise<unknown>) => void
  const released = new Promise<((tx: Transaction) => Promise<unknown>) | undefined>((resolve) => (release = resolve))
  let locked!: () => void
  const isLocked = new Promise<void>((resolve) => (locked = resolve))
  const holding = prisma.$transaction(
    async (tx) => {
      await tx.$queryRaw(select)
      locked()
      await (await released)?.(tx)
    },
    { timeout: 20_000 },
  )
  await Promise.race([isLocked, holding])
  return {
    async release(write) {
      release(write)
      await holding
    },
  }
}

/** Resolves once at least `count` statements on the database wait for a lock (within `timeoutMs`, else throws). */
export async function waitForLockWaiters(prisma: PrismaClient, count: number, timeoutMs = 10_000): Promise<void> {
  let waiting = 0
  const waited = await within(timeoutMs, async () => {
    ;[{ waiting }] = await prisma.$queryRaw<{ waiting: number }[]>`
      SELECT count(*)::int AS "waiting" FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
    return waiting >= count
  }, 20)
  if (waited === null) throw new Error(`${waiting} of ${count} statements wait for a lock after ${timeoutMs} ms`)
}
