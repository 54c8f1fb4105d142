/**
 * A PostgreSQL database of a benchmark's own, created on the DATABASE_URL server (default the local `test`
 * one), migrated by the service's own runner and dropped by `drop()`. Every statement, Prisma's and the raw ones
 * (prepared as the service prepares them), is reported into `queries`, so that a benchmark can show the EXPLAIN of
 * the one it timed.
 */
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import { openDatabase, poolTransaction, poolWrite, preparedName, SESSION_OPTIONS, type Database, type Prepared } from '../../src/db/database.js'
import { PrismaClient } from '../../src/generated/prisma/client.js'

export interface LoggedQuery {
  query: string
  params: string
  duration: number
}

export interface BenchDatabase {
  database: Database
  /** The connection string of the benchmark's database. */
  url: string
  queries: LoggedQuery[]
  /** Closes the connections and drops the database (unless kept). */
  drop(): Promise<void>
  /** A kept database, already loaded. */
  reused: boolean
}

const SERVER_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test'

async function onServer(sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: SERVER_URL })
  await admin.connect()
  try {
    await admin.query(sql)
  } finally {
    await admin.end()
  }
}

/**
 * BENCH_DATABASE names a database kept by an earlier run (BENCH_KEEP_DATABASE=1 keeps it, for EXPLAINs by hand):
 * it is reused as it is (`reused`; migrations still applied) and kept, so that a benchmark can skip its loading.
 */
export async function openBenchDatabase(prefix: string): Promise<BenchDatabase> {
  const reused = process.env.BENCH_DATABASE
  const name = reused ?? `${prefix}_${randomBytes(4).toString('hex')}`
  const address = new URL(SERVER_URL)
  address.pathname = `/${name}`
  const url = address.toString()
  if (!reused) await onServer(`CREATE DATABASE "${name}"`)
  const keep = reused !== undefined || process.env.BENCH_KEEP_DATABASE === '1'
  const drop = async () => {
    if (keep) console.log(`database ${name} kept`)
    else await onServer(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
  }
  try {
    await (await openDatabase({ databaseUrl: url, dataDir: 'unused' })).close()
  } catch (error) {
    await drop()
    throw error
  }
  // The service's own session settings (src/db/database.ts), so that the statements run as they would there.
  const pool = new pg.Pool({ connectionString: url, max: 10, options: SESSION_OPTIONS })
  // Dropping the database at the end ends these connections; that is no error.
  pool.on('error', () => {})
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool), log: [{ emit: 'event', level: 'query' }] })
  const queries: LoggedQuery[] = []
  prisma.$on('query', (event) => queries.push({ query: event.query, params: event.params, duration: event.duration }))
  const raw = async <Row>(text: string, params: unknown[] = [], prepared?: Prepared) => {
    const started = performance.now()
    const name = prepared === 'prepared' ? preparedName(text) : undefined
    const { rows } = await pool.query({ text, values: params, name })
    queries.push({ query: text, params: JSON.stringify(params), duration: performance.now() - started })
    return rows as Row[]
  }
  const database: Database = {
    prisma,
    kind: 'postgres',
    query: raw,
    sql: raw,
    write: (text, params) => poolWrite(pool, text, params),
    transaction: (work) => poolTransaction(pool, work),
    ping: async () => true,
    pools: () => [{ name: 'main', max: 10, total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }],
    interrupt: () => {},
    interrupted: () => false,
    close: async () => {
      await prisma.$disconnect()
      await pool.end()
    },
  }
  return {
    database,
    url,
    queries,
    reused: reused !== undefined,
    async drop() {
      await database.close()
      await drop()
    },
  }
}

/** The p-th percentile of values sorted in ascending order (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}
