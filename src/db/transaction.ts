/**
 * Interactive transactions with the limits the service chooses, run again when PostgreSQL aborts one for a
 * deadlock or a serialization failure (a busy database, not a fault: the same work succeeds on a second try).
 */
import type { CopyIn, Database, PrismaClient, SqlQuery } from './database.js'
import { CONNECT_TIMEOUT_MS } from './database.js'
import { isTransactionConflict } from './errors.js'
import type { Prisma } from '../generated/prisma/client.js'

export type Transaction = Prisma.TransactionClient

/**
 * maxWait: how long a transaction waits for a pooled connection. The same bound as every other query's wait
 * for the pool (CONNECT_TIMEOUT_MS), so "the pool cannot serve in time" means one thing: a 503 after 3 s.
 *
 * timeout: how long a transaction may run, waits for row locks included. The service's transactions are a
 * handful of statements (milliseconds); what takes longer is a queue of writers of one link, each waiting for
 * the lock of the one before. 5 s lets such a queue of a few hundred drain (measured: 200 writers of one link
 * on a 2-core machine take about 2 s) while a transaction stuck for longer gives its connection and its locks
 * back and its request a 503.
 */
export const TRANSACTION_OPTIONS = { maxWait: CONNECT_TIMEOUT_MS, timeout: 5000 } as const

/** Attempts of one transaction that keeps meeting deadlocks or serialization failures; then a 503. */
export const TRANSACTION_ATTEMPTS = 3

/** Waits up to 25 ms, 50 ms… (random: writers that collided once should not collide again in step). */
const backoff = (attempt: number) => new Promise((resolve) => setTimeout(resolve, Math.random() * 25 * 2 ** (attempt - 1)))

/**
 * Runs a transaction, again (a bounded number of times) when PostgreSQL aborted it for a conflict. A single
 * statement is a transaction of its own: two that take the same unique keys in opposite orders (two folders
 * swapping names) deadlock like any others.
 */
export async function retryingConflicts<T>(transaction: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await transaction()
    } catch (error) {
      if (!isTransactionConflict(error) || attempt >= TRANSACTION_ATTEMPTS) throw error
      await backoff(attempt)
    }
  }
}

/** Runs `work` as one Prisma interactive transaction, again after a conflict. */
export function inTransaction<T>(prisma: PrismaClient, work: (tx: Transaction) => Promise<T>): Promise<T> {
  return retryingConflicts(() => prisma.$transaction(work, TRANSACTION_OPTIONS))
}

/** Runs `work` as one transaction of plain SQL on the driver (Database.transaction), again after a conflict. */
export function inSqlTransaction<T>(database: Database, work: (query: SqlQuery, copyIn: CopyIn) => Promise<T>): Promise<T> {
  return retryingConflicts(() => database.transaction(work))
}
