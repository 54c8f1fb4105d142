import type { PGlite } from '@electric-sql/pglite'
import { PrismaPg } from '@prisma/adapter-pg'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import { PrismaClient } from '../generated/prisma/client.js'
import { acquireDataDirLock, prepareDataDir } from './data-dir-lock.js'
import { isConnectionLost, isDatabaseUnavailable, OutcomeUnknownError } from './errors.js'
import { applyMigrations, type SqlRunner } from './migrate.js'

export type { PrismaClient }

/**
 * One parameterised statement, its rows as the driver parses them. `prepared`: a prepared statement on
 * PostgreSQL (see preparedName), for a text the service sends over and over.
 */
export type SqlQuery = <Row = Record<string, unknown>>(sql: string, params?: unknown[], prepared?: Prepared) => Promise<Row[]>

/**
 * `COPY <table> (<columns>) FROM STDIN` with `data` in COPY's text format (src/db/copy-text.ts):
 * PostgreSQL reads rows this way at about a third of the cost of a multi-row INSERT from JSON.
 */
export type CopyIn = (copySql: string, data: string) => Promise<void>

/** Marks a statement to prepare (see preparedName); the others are planned each time they run. */
export type Prepared = 'prepared'

export interface Database {
  prisma: PrismaClient
  /** `postgres` for a server reached through DATABASE_URL, `embedded` for PGlite. */
  kind: 'postgres' | 'embedded'
  /**
   * Plain SQL straight through the driver, for the few reads on the visitors' hot path: the same statement
   * costs several times less CPU than through Prisma's client. Rows come as the driver parses them. `prepared`
   * makes it a prepared statement on PostgreSQL (parsed and planned once per connection). On PostgreSQL these
   * statements have connections of their own (VISITOR_POOL_SIZE), so that API traffic holding the main pool
   * never makes a visitor wait, and their prepared statements keep one generic plan: PostgreSQL would
   * otherwise plan every execution again (a batch's arrays look different each time), which measured at twice
   * the cost of the statement itself (0.35 ms against 0.17 ms per read of 3 links, loopback).
   */
  query<Row>(sql: string, params?: unknown[], prepared?: Prepared): Promise<Row[]>
  /**
   * Plain SQL on the main pool, for the API's hottest statements (a link read, created, updated, deleted): one
   * statement through Prisma's client cost several times its cost through the driver, and the client's
   * `include` sent three statements where one does. `prepared` for the texts sent on every request (preparedName).
   */
  sql<Row>(sql: string, params?: unknown[], prepared?: Prepared): Promise<Row[]>
  /**
   * `sql` for a write whose outcome matters when the connection breaks (a create): a connection lost after the
   * statement was sent throws OutcomeUnknownError (src/db/errors.ts), since PostgreSQL may have run and committed
   * it; a failure to get a connection at all is thrown as it is (nothing was sent).
   */
  write<Row>(sql: string, params?: unknown[], prepared?: Prepared): Promise<Row[]>
  /**
   * Plain SQL statements in one transaction, on the main pool, for bulk work (the visit batches): Prisma's
   * client would serialise and check thousands of array elements per statement first, at a cost that showed
   * under load. Rolled back if `work` throws.
   */
  transaction<T>(work: (query: SqlQuery, copyIn: CopyIn) => Promise<T>, options?: { statementTimeoutMs?: number }): Promise<T>
  /** True when the database answers a trivial query. */
  ping(): Promise<boolean>
  /**
   * The connection pools now (metrics, overload protection): `main` (Prisma and the API's plain SQL) and
   * `visitor` (the redirects' reads). On the embedded database, `main` alone: PGlite is one connection inside
   * the process, and the statements queued for it are its waiting queries.
   */
  pools(): PoolStats[]
  /**
   * Ends the connections lent out now, so that their statements fail at once as the database unavailable (a
   * 503): the close of the app calls it once requests have had their time, so that none waits past it for a
   * database that stopped answering. A transaction open on them rolls back; a statement PostgreSQL runs on its
   * own may still complete, as when a connection breaks (`write` says so: OutcomeUnknownError). Nothing on the
   * embedded database.
   */
  interrupt(): void
  /** Whether interrupt() was called: the requests' time is up, and a loop that retries gives up. */
  interrupted(): boolean
  /** Closes the connections; a statement still going is ended (interrupt), not waited for. */
  close(): Promise<void>
}

export interface PoolStats {
  name: 'main' | 'visitor'
  /** Most connections the pool opens. */
  max: number
  /** Connections open (idle or in use). */
  total: number
  idle: number
  /** Queries waiting for a connection. */
  waiting: number
}

const statsOf = (name: PoolStats['name'], pool: pg.Pool, max: number): PoolStats => ({
  name,
  max,
  total: pool.totalCount,
  idle: pool.idleCount,
  waiting: pool.waitingCount,
})

export interface OpenDatabaseOptions {
  databaseUrl?: string
  /** Directory of the embedded database; `memory://` keeps it in memory (tests). */
  dataDir: string
  /** Apply pending migrations before returning (the default). */
  migrate?: boolean
  /** STATEMENT_TIMEOUT_MS unless a test shortens it. */
  statementTimeoutMs?: number
}

/**
 * Fail fast instead of queueing requests behind a database that does not answer. pg's pool applies the same
 * bound to a request waiting for a free connection, so it is also how long a request may queue for the pool
 * before it is answered 503 (transactions wait the same, src/db/transaction.ts).
 */
export const CONNECT_TIMEOUT_MS = 3000

/**
 * How long a statement may go without an answer on an open connection (a database frozen, or a network path that
 * drops packets without closing anything): the statement fails as the database unavailable (a 503), and its
 * connection is closed rather than given back to the pool (endOnReadTimeout). Far above what a statement of the
 * API takes (moving a link's group history, the longest, took 2.4 s for 121,000 rows); the visitor side's reads
 * (one row) and the readiness probe have shorter ones, the rollup a longer one (LONG_STATEMENT_TIMEOUT_MS).
 */
export const STATEMENT_TIMEOUT_MS = 30_000
const VISITOR_STATEMENT_TIMEOUT_MS = 3000
const PING_TIMEOUT_MS = 2000
/** The rollup's steps (an hour of visits each; 4.5 million of them took 17 s). */
export const LONG_STATEMENT_TIMEOUT_MS = 10 * 60_000

const isReadTimeout = (error: unknown) => (error as Error | null)?.message === 'Query read timeout'

/**
 * A connection whose statement got no answer in time still has that statement under way: given back to the pool,
 * the next statement would queue behind it. Ending it makes the pool drop it when it is released, whoever holds
 * it (Prisma's transactions release without an error); the statement's own caller gets its error as before.
 */
function endOnReadTimeout(client: pg.Client): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown
  const end = (error: unknown) => {
    if (isReadTimeout(error)) client.end().catch(() => {})
  }
  ;(client as { query: unknown }).query = (...args: unknown[]) => {
    const callback = args.at(-1)
    if (typeof callback === 'function') {
      args[args.length - 1] = (error: unknown, result: unknown) => {
        end(error)
        callback(error, result)
      }
      return query(...args)
    }
    const result = query(...args)
    if (result instanceof Promise) result.catch(end)
    return result
  }
}

/**
 * Connections per instance. Prisma's client runtime makes the Node process the bottleneck well before ten
 * connections keep PostgreSQL busy (stack notes: its CPU, not the database's, limits throughput), and writers
 * of one link queue in the process rather than each holding a connection (keyed-queue.ts), so more would only
 * cost PostgreSQL memory and max_connections. 10 per instance (and 2 for visitor reads) leave room for several
 * instances and the command line under PostgreSQL's default max_connections of 100.
 */
const POOL_SIZE = 10

/**
 * Settings of every session. TimeZone UTC: visits' instants are timestamptz, which PostgreSQL turns into text in
 * the session's zone, and the stats cut days and hours with date_trunc in it; a server whose default zone is
 * another (initdb takes the machine's) moved every visit of /visits and every stats bucket by its offset.
 * JIT off: PostgreSQL compiles a statement whose estimated cost passes
 * jit_above_cost, which the stats over months of aggregates do, and compiling took 0.3 to 2 s on this service's
 * machines, for statements that run in tens of milliseconds without it (bench:stats). Nothing here runs long
 * enough for compiled expressions to pay back.
 * An idle transaction ends after 15 s: one whose client vanished without a word (a network that drops packets)
 * would otherwise hold its rows' locks, a slug and an Idempotency-Key's rows among them, until the kernel's
 * keepalive noticed, two hours later (review today). The service's transactions never wait that long between
 * their statements (TRANSACTION_OPTIONS: 5 s for the whole).
 */
export const SESSION_OPTIONS = '-c jit=off -c TimeZone=UTC -c idle_in_transaction_session_timeout=15s'

/** The visitor reads' own connections: the redirect cache has at most 2 reads under way (redirect-view.ts). */
const VISITOR_POOL_SIZE = 2

/**
 * The name under which a pool prepares `text`, or none once MAX_PREPARED_TEXTS texts have names.
 *
 * The API's statements are planned each time otherwise, and planning is most of their cost: the read of a link
 * with its pixels and clicks (which looks into every monthly partition of the visits) took PostgreSQL 7 times
 * longer unprepared than prepared (pgbench, 4 clients: 4,500 against 32,700 a second; a bare select by key
 * 27,600 against 62,000). PostgreSQL keeps a prepared statement per connection until it closes, so the
 * texts are bounded: callers prepare texts drawn from small families (a read by key, the list's filters, the
 * columns an update sets), and should a family prove larger than thought the rest simply run unprepared.
 * The names need a session to themselves: behind a pooler, its session mode, or PgBouncer 1.21 or later
 * with max_prepared_statements (README, "Deploying").
 */
export function preparedName(text: string): string | undefined {
  let name = preparedNames.get(text)
  if (name === undefined && preparedNames.size < MAX_PREPARED_TEXTS) preparedNames.set(text, (name = `api_${++namesGiven}`))
  return name
}
export const MAX_PREPARED_TEXTS = 200
const preparedNames = new Map<string, string>()
let namesGiven = 0

/**
 * PostgreSQL refuses to run a prepared statement whose result columns changed type since the connection
 * prepared it ("cached plan must not change result type", SQLSTATE 0A000): what a migration that changes a
 * column's type does to the instances still running the old release during a rolling deploy, on every
 * connection and for as long as it lives. The statement did not run. Its text gets a new name, which every
 * connection prepares afresh on its next use, and it runs once more (outside a transaction at once; a
 * transaction, aborted by the error, runs once more as a whole: poolTransaction).
 */
function isStalePrepared(error: unknown, config: pg.QueryConfig): boolean {
  if (config.name === undefined || (error as { code?: unknown } | null)?.code !== '0A000') return false
  // The first of several requests to meet it renames the text; the others find the new name already given.
  if (preparedNames.get(config.text) === config.name) preparedNames.set(config.text, `api_${++namesGiven}`)
  return true
}

const pgQuery = (text: string, values: unknown[], prepared?: Prepared): pg.QueryConfig => ({
  text,
  values,
  name: prepared === 'prepared' ? preparedName(text) : undefined,
})

/** One statement through `run` (a pool's or a client's query), prepared again should its plan be stale. */
async function runStatement<Row>(run: (config: pg.QueryConfig) => Promise<pg.QueryResult>, text: string, values: unknown[], prepared?: Prepared): Promise<Row[]> {
  const config = pgQuery(text, values, prepared)
  try {
    return (await run(config)).rows as Row[]
  } catch (error) {
    if (!isStalePrepared(error, config)) throw error
    return (await run(pgQuery(text, values, prepared))).rows as Row[]
  }
}

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  return options.databaseUrl ? openPostgres(options.databaseUrl, options) : openEmbedded(options.dataDir, options.migrate ?? true)
}

/** While migrations run, how often PostgreSQL is asked on a connection of its own whether it still answers. */
export const MIGRATION_PING_EVERY_MS = 3000

/**
 * Applies the migrations on a connection of their own. Their statements have no deadline (an index on a large
 * table takes what it takes, and waiting for the lock of another instance migrating is normal), so PostgreSQL
 * is asked every MIGRATION_PING_EVERY_MS, on a new connection, whether it still answers: a server that gave no
 * answer twice in a row (a network path gone silent, a server that stopped) fails the start with a message
 * instead of hanging it for ever. An error PostgreSQL sends (too many connections, say) is an answer.
 */
async function migrate(connectionString: string): Promise<void> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, options: SESSION_OPTIONS })
  client.on('error', () => {})
  await connectWithin(client)
  let timer: NodeJS.Timeout | undefined
  let finished = false
  let unanswered = 0
  const silent = new Promise<never>((_resolve, reject) => {
    const ping = async () => {
      try {
        await pingOnNewConnection(connectionString)
        unanswered = 0
      } catch (error) {
        // A SQLSTATE is PostgreSQL's own answer; anything else (a timeout, a refused or cut connection) is none.
        if (isPostgresError(error)) unanswered = 0
        else if (++unanswered >= 2) {
          return reject(new Error(`PostgreSQL stopped answering while the migrations ran: ${(error as Error).message}`, { cause: error }))
        }
      }
      if (!finished) timer = setTimeout(ping, MIGRATION_PING_EVERY_MS)
    }
    timer = setTimeout(ping, MIGRATION_PING_EVERY_MS)
  })
  silent.catch(() => {})
  try {
    await Promise.race([applyMigrations(pgRunner(client)), silent])
  } finally {
    finished = true
    clearTimeout(timer)
    // A connection to a server that stopped answering may never end: not waited for beyond the ping's deadline.
    await waitAtMost(client.end(), PING_TIMEOUT_MS)
  }
}

/** `SELECT 1` on a connection of its own, connect and statement within PING_TIMEOUT_MS each; the connection ends. */
async function pingOnNewConnection(connectionString: string): Promise<void> {
  const pinger = new pg.Client({ connectionString, connectionTimeoutMillis: PING_TIMEOUT_MS, query_timeout: PING_TIMEOUT_MS } as pg.ClientConfig)
  pinger.on('error', () => {})
  try {
    await pinger.connect()
    await pinger.query('SELECT 1')
  } finally {
    void waitAtMost(pinger.end(), PING_TIMEOUT_MS)
  }
}

/**
 * Whether PostgreSQL answers (/readyz), within PING_TIMEOUT_MS in all: on an idle connection of the API's pool when
 * it has one and no query waits (no new connection for every probe); otherwise on a connection of its own, so that
 * a busy pool is not taken for a database out of reach (the probe waited in the pool's queue for its 3 s and said
 * "unreachable"). A server that refuses a new connection for want of room (SQLSTATE class 53, too many connections)
 * answers. Probes at once share one; while the pool stays busy, a probe's own connection's answer stands for
 * BUSY_PING_REUSE_MS, so that a flood of /readyz (it needs no token) cannot open a connection each.
 */
function postgresPinger(pool: pg.Pool, connectionString: string): () => Promise<boolean> {
  let pending: Promise<boolean> | null = null
  let ownConnection: { at: number; answered: boolean } | null = null
  const probe = async (): Promise<boolean> => {
    const free = pool.idleCount > 0 && pool.waitingCount === 0
    if (!free && ownConnection && performance.now() - ownConnection.at < BUSY_PING_REUSE_MS) return ownConnection.answered
    const asked = free ? pool.query({ text: 'SELECT 1', query_timeout: PING_TIMEOUT_MS } as pg.QueryConfig) : pingOnNewConnection(connectionString)
    const answered = await withinPingDeadline(asked).then(
      () => true,
      (error: unknown) => isPostgresError(error) && (error as pg.DatabaseError).code!.startsWith('53'),
    )
    if (!free) ownConnection = { at: performance.now(), answered }
    return answered
  }
  return () =>
    (pending ??= probe().finally(() => {
      pending = null
    }))
}

const BUSY_PING_REUSE_MS = 1000

/** `promise`, or a rejection once PING_TIMEOUT_MS have passed (connect and statement together). */
function withinPingDeadline(promise: Promise<unknown>): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error('no answer in time')), PING_TIMEOUT_MS)
  })
  promise.catch(() => {})
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

/**
 * pg reports a connection that got no answer within connectionTimeoutMillis as "Connection terminated
 * unexpectedly" or "timeout expired", which read like a server that hung up: said as what it is, for the start's
 * message.
 */
async function connectWithin(client: pg.Client): Promise<void> {
  const started = performance.now()
  try {
    await client.connect()
  } catch (error) {
    // pg's two ways of saying its connect timeout fired (before and after the connection was made).
    const timedOut = /^(timeout expired|Connection terminated unexpectedly)$/.test((error as Error).message) && performance.now() - started >= CONNECT_TIMEOUT_MS - 100
    if (!timedOut) throw error
    throw new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s (is the host reachable, and PostgreSQL listening there?)`, { cause: error })
  }
}

/** The clients of `pool` lent out now (for a statement or a transaction). */
function lentClients(pool: pg.Pool): Set<pg.Client> {
  const lent = new Set<pg.Client>()
  pool.on('acquire', (client) => lent.add(client))
  pool.on('release', (_error, client) => lent.delete(client))
  pool.on('remove', (client) => lent.delete(client))
  return lent
}

/** How long closing waits for the pools to end once their connections in use were ended. */
const CLOSE_WAIT_MS = 500

/** An error PostgreSQL itself sent (pg's DatabaseError carries its SQLSTATE, five characters). */
const isPostgresError = (error: unknown) => error instanceof pg.DatabaseError && /^[0-9A-Z]{5}$/.test(error.code ?? '')

/** `promise`, or nothing once `ms` have passed (its outcome ignored). */
export const waitAtMost = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise.catch(() => undefined), new Promise<void>((resolve) => setTimeout(resolve, ms).unref())])

async function openPostgres(connectionString: string, options: OpenDatabaseOptions): Promise<Database> {
  if (options.migrate ?? true) await migrate(connectionString)
  const pool = new pg.Pool({
    connectionString,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: options.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS,
    max: POOL_SIZE,
    options: SESSION_OPTIONS,
  })
  // An idle client that loses its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {})
  pool.on('connect', endOnReadTimeout)
  const visitorPool = new pg.Pool({
    connectionString,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: VISITOR_STATEMENT_TIMEOUT_MS,
    max: VISITOR_POOL_SIZE,
    options: `${SESSION_OPTIONS} -c plan_cache_mode=force_generic_plan`,
  })
  visitorPool.on('error', () => {})
  visitorPool.on('connect', endOnReadTimeout)
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool) })
  const lent = [lentClients(pool), lentClients(visitorPool)]
  // pg's end() destroys the socket of a client whose statement is under way (it would wait for ever otherwise).
  let interrupted = false
  const interrupt = () => {
    interrupted = true
    lent.forEach((clients) => clients.forEach((client) => void client.end().catch(() => {})))
  }
  return {
    prisma,
    kind: 'postgres',
    query: (sql, params = [], prepared) => runStatement((config) => visitorPool.query(config), sql, params, prepared),
    sql: (sql, params = [], prepared) => runStatement((config) => pool.query(config), sql, params, prepared),
    write: (sql, params, prepared) => poolWrite(pool, sql, params, prepared),
    transaction: (work, options) => poolTransaction(pool, work, options?.statementTimeoutMs),
    ping: postgresPinger(pool, connectionString),
    pools: () => [statsOf('main', pool, POOL_SIZE), statsOf('visitor', visitorPool, VISITOR_POOL_SIZE)],
    interrupt,
    interrupted: () => interrupted,
    async close() {
      await prisma.$disconnect()
      // pool.end() waits until every connection is given back: one whose statement never answers never is.
      interrupt()
      await waitAtMost(Promise.all([pool.end(), visitorPool.end()]), CLOSE_WAIT_MS)
    },
  }
}

/**
 * PGlite reads timestamps with `new Date(text)`, whose legacy parsing takes years 0 to 49 for 2000 to 2049
 * (0001-01-01 came back as 2001-01-01). The parsers node-postgres uses on the server path read every year right,
 * so both databases answer the same instants.
 */
const EMBEDDED_TIMESTAMP_PARSERS = {
  [pg.types.builtins.TIMESTAMP]: pg.types.getTypeParser(pg.types.builtins.TIMESTAMP),
  [pg.types.builtins.TIMESTAMPTZ]: pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ),
}

/**
 * PGlite runs one statement or transaction at a time and queues the others, without a deadline: counted here (its
 * public methods, the ones Prisma's adapter and this module call), the queue is the embedded database's pool
 * queue for OVERLOAD_DB_POOL_WAITING and the metrics. Statements inside a transaction go by the transaction's
 * own object, not counted again.
 */
function countInFlight(client: PGlite): () => number {
  let inFlight = 0
  const methods = client as unknown as Record<'query' | 'exec' | 'transaction', (...args: unknown[]) => Promise<unknown>>
  for (const method of ['query', 'exec', 'transaction'] as const) {
    const original = methods[method].bind(client)
    methods[method] = async (...args) => {
      inFlight++
      try {
        return await original(...args)
      } finally {
        inFlight--
      }
    }
  }
  return () => inFlight
}

async function openEmbedded(dataDir: string, migrate: boolean): Promise<Database> {
  // Loaded only here: a service on PostgreSQL does not carry the embedded database in its memory.
  const [{ PGlite }, { PrismaPGlite }] = await Promise.all([import('@electric-sql/pglite'), import('pglite-prisma-adapter')])
  const inMemory = dataDir.startsWith('memory://')
  if (!inMemory) prepareDataDir(dataDir)
  const releaseLock = inMemory ? () => {} : acquireDataDirLock(dataDir)
  let client: PGlite
  try {
    client = new PGlite({ dataDir: inMemory ? undefined : dataDir, parsers: EMBEDDED_TIMESTAMP_PARSERS })
    await client.waitReady
    if (migrate) await applyMigrations(pgliteRunner(client))
  } catch (error) {
    releaseLock()
    throw error
  }
  const inFlight = countInFlight(client)
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(client) })
  return {
    prisma,
    kind: 'embedded',
    query: async <Row>(sql: string, params: unknown[] = []) => (await client.query<Row>(sql, params)).rows,
    sql: async <Row>(sql: string, params: unknown[] = []) => (await client.query<Row>(sql, params)).rows,
    // In the process: no connection to lose between the statement and its answer.
    write: async <Row>(sql: string, params: unknown[] = []) => (await client.query<Row>(sql, params)).rows,
    transaction: (work) =>
      client.transaction((tx) =>
        work(
          async (sql, params = []) => (await tx.query(sql, params)).rows as never,
          // PGlite reads a COPY's data from a blob it names /dev/blob.
          async (copySql, data) => void (await tx.query(copySql.replace(/FROM STDIN$/, "FROM '/dev/blob'"), [], { blob: new Blob([data]) })),
        ),
      ),
    ping: () => pingWith(prisma),
    // One connection, as it were: what waits for it is what overload protection and the metrics watch.
    pools: () => {
      const going = inFlight()
      return [{ name: 'main', max: 1, total: 1, idle: going === 0 ? 1 : 0, waiting: Math.max(0, going - 1) }]
    },
    // In the process: no connection to end.
    interrupt: () => {},
    interrupted: () => false,
    async close() {
      await prisma.$disconnect()
      await client.close()
      releaseLock()
    },
  }
}

/**
 * `work` on one connection of the pool. A connection that breaks while it is checked out makes its client emit
 * 'error', which crashes the process when nothing listens (pg-pool listens only while the client is idle); the
 * statement in flight fails with the same error, which is how `work` learns of it. A broken client is discarded,
 * not given back to the pool.
 */
async function onPooledClient<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  const reportedToTheStatement = () => {}
  client.on('error', reportedToTheStatement)
  let broken: Error | undefined
  try {
    return await work(client)
  } catch (error) {
    if (isDatabaseUnavailable(error)) broken = error as Error
    throw error
  } finally {
    client.off('error', reportedToTheStatement)
    client.release(broken)
  }
}

/** Database.transaction on a pg pool: BEGIN … COMMIT on one of its connections, ROLLBACK if `work` throws. */
export async function poolTransaction<T>(pool: pg.Pool, work: (query: SqlQuery, copyIn: CopyIn) => Promise<T>, statementTimeoutMs?: number): Promise<T> {
  let stale = false
  let began = false
  const attempt = () =>
    onPooledClient(pool, async (client) => {
      began = false
      await client.query('BEGIN')
      began = true
      try {
        const result = await work(async (sql, params = [], prepared) => {
          const config: pg.QueryConfig = pgQuery(sql, params, prepared)
          // The pool's deadline unless this transaction has a longer one (pg reads query_timeout per statement).
          if (statementTimeoutMs !== undefined) Object.assign(config, { query_timeout: statementTimeoutMs })
          try {
            return (await client.query(config)).rows
          } catch (error) {
            if (isStalePrepared(error, config)) stale = true
            throw error
          }
        }, (copySql, data) => pipeline(Readable.from([data]), client.query(copyFrom(copySql))))
        await client.query('COMMIT')
        return result
      } catch (error) {
        // A connection that did not answer is closed (onPooledClient), which rolls back; asking it would only wait.
        if (!isDatabaseUnavailable(error)) await client.query('ROLLBACK').catch(() => {})
        throw error
      }
    })
  for (let attempts = 1; ; attempts++) {
    try {
      return await attempt()
    } catch (error) {
      // Nothing of the transaction ran, and another attempt can succeed: its prepared statement was stale (renamed
      // now), or its BEGIN went to a connection that had broken while idle in the pool (a network cut, which the
      // pool learns of only once it reads the socket's close; the broken one is discarded).
      const idleBroken = !began && isConnectionLost(error)
      if (!(stale || idleBroken) || attempts >= TRANSACTION_BEGIN_ATTEMPTS) throw error
      stale = false
    }
  }
}

/** Attempts of a transaction whose BEGIN met a connection broken while idle (the pool may hold several). */
const TRANSACTION_BEGIN_ATTEMPTS = 3

/** Database.write on a pg pool: a connection lost once the statement may have reached the server is OutcomeUnknownError. */
export function poolWrite<Row>(pool: pg.Pool, sql: string, params: unknown[] = [], prepared?: Prepared): Promise<Row[]> {
  return onPooledClient(pool, async (client) => {
    try {
      return await runStatement<Row>((config) => client.query(config), sql, params, prepared)
    } catch (error) {
      throw isDatabaseUnavailable(error) ? new OutcomeUnknownError(error) : error
    }
  })
}

async function pingWith(prisma: PrismaClient): Promise<boolean> {
  try {
    await prisma.$queryRawUnsafe('SELECT 1')
    return true
  } catch {
    return false
  }
}

function pgRunner(client: pg.Client): SqlRunner {
  return {
    query: async (sql, params = []) => (await client.query(sql, params)).rows,
    exec: async (sql) => {
      await client.query(sql)
    },
  }
}

function pgliteRunner(client: PGlite): SqlRunner {
  return {
    query: async (sql, params = []) => (await client.query<Record<string, unknown>>(sql, params)).rows,
    exec: async (sql) => {
      await client.exec(sql)
    },
  }
}
