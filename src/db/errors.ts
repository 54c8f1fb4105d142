/**
 * Prisma's codes of a database out of reach: unreachable (P1001), timed out (P1002, P1008), closed (P1017), no
 * connection from the pool in time (P2024), and a server that refuses the service (authentication failed,
 * P1000; database does not exist, P1003; access denied, P1010).
 */
const UNAVAILABLE_PRISMA_CODES = new Set(['P1000', 'P1001', 'P1002', 'P1003', 'P1008', 'P1010', 'P1017', 'P2024'])
// "permission denied for database": CONNECT revoked, a FATAL 42501 at connection time (a 42501 of a statement, a
// missing grant on a table, says "for table" or "for schema" and stays a 500: that is the service's bug). "is not
// currently accepting connections": the database's ALLOW_CONNECTIONS off (maintenance), a FATAL 55000 at connection
// time (a 55000 of a statement is the service's bug).
const UNAVAILABLE_MESSAGE =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|Connection terminated|timeout exceeded when trying to connect|Query read timeout|Can't reach database|DatabaseNotReachable|connection is insecure|the database system is (starting up|shutting down)|permission denied for database|is not currently accepting connections/i

interface ErrorLike {
  name?: string
  code?: unknown
  message?: string
  cause?: unknown
  meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; kind?: unknown; constraint?: { index?: unknown } } } }
}

/** The error and its causes, outermost first (a few levels: drivers wrap, Prisma wraps again). */
function* chain(error: unknown): Generator<ErrorLike> {
  let current = error as ErrorLike | undefined
  for (let depth = 0; current && depth < 5; depth++, current = current.cause as ErrorLike | undefined) yield current
}

/**
 * SQLSTATEs of a server that ended the session or cannot take one: an administrator's or a failover's
 * pg_terminate_backend or shutdown (57P01), a crash of another backend (57P02), a server starting or stopping
 * (57P03), and the connection exceptions (class 08) but 08P01, a protocol violation: an ordinary error of a
 * statement the client got wrong, on a connection that still works. No connection slot left (53300) is a busy
 * database (isDatabaseBusy).
 */
const ENDED_SESSION_STATES = new Set(['57P01', '57P02'])
/**
 * And a server that refuses the service's sessions: its database dropped or renamed (3D000, invalid_catalog_name)
 * or its role gone or refused (class 28). Not the service's bug, and nothing a retry of the request changes
 * until an administrator does: the database is out of reach, as /readyz says.
 */
const UNAVAILABLE_STATES = new Set([...ENDED_SESSION_STATES, '57P03', '3D000', '28000', '28P01'])
const isConnectionException = (code: string) => code.startsWith('08') && code.length === 5 && code !== '08P01'
/** The SQLSTATE of a driver's error (its code) or of Prisma's (passed on from the driver adapter). */
const sqlStates = (current: ErrorLike) => [current.code, sqlState(current)].filter((code): code is string => typeof code === 'string')

/** True for errors that mean "the database cannot be reached" rather than "this query is wrong". */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (const current of chain(error)) {
    if (current.name === 'PrismaClientInitializationError') return true
    if (typeof current.code === 'string' && UNAVAILABLE_PRISMA_CODES.has(current.code)) return true
    if (sqlStates(current).some((code) => UNAVAILABLE_STATES.has(code) || isConnectionException(code))) return true
    if (typeof current.message === 'string' && UNAVAILABLE_MESSAGE.test(current.message)) return true
  }
  return false
}

/**
 * A connection that broke while in use (reset, terminated, or silent past its deadline), as opposed to one that
 * could not be had: what was sent on it, a COMMIT included, may have run.
 */
const LOST_IN_USE = /Connection terminated|ECONNRESET|EPIPE|Query read timeout/i

export function isConnectionLost(error: unknown): boolean {
  for (const current of chain(error)) {
    if (typeof current.message === 'string' && LOST_IN_USE.test(current.message)) return true
    if (sqlStates(current).some((code) => ENDED_SESSION_STATES.has(code))) return true
  }
  return false
}

/** True when a write failed on a unique constraint (P2002, whichever driver adapter reported it). */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code
  // 23505: the same from a plain SQL statement (Database.sql).
  return code === 'P2002' || code === '23505'
}

/** The PostgreSQL SQLSTATE behind a Prisma error, as both driver adapters pass it on. */
function sqlState(error: ErrorLike): unknown {
  return error.meta?.driverAdapterError?.cause?.originalCode
}

/**
 * True when PostgreSQL aborted the transaction for a deadlock (40P01) or a serialization failure (40001): the
 * same transaction run again will most likely succeed. Prisma reports these as P2034 for model queries; raw
 * queries come as P2010, and PGlite's adapter does not map 40P01 at all, hence the SQLSTATE.
 */
export function isTransactionConflict(error: unknown): boolean {
  for (const current of chain(error)) {
    if (current.code === 'P2034' || current.code === '40P01' || current.code === '40001') return true
    const state = sqlState(current)
    if (state === '40P01' || state === '40001') return true
  }
  return false
}

const BUSY_TRANSACTION = /Unable to start a transaction in the given time|cannot be executed on an expired transaction/

/**
 * True when the database answers but cannot take more work in time: Prisma could not start a transaction
 * within maxWait, or a transaction outlived its timeout (both P2028), or the server has no connection slot
 * left (53300, P2037). A reason to try again shortly, not a fault of the service.
 */
export function isDatabaseBusy(error: unknown): boolean {
  for (const current of chain(error)) {
    // Other P2028 messages (a transaction not found, already closed) are faults of the service, not load.
    if (current.code === 'P2028' && typeof current.message === 'string' && BUSY_TRANSACTION.test(current.message)) return true
    if (current.code === 'P2037' || current.code === '53300') return true
    if (sqlState(current) === '53300') return true
  }
  return false
}

/** The name of the foreign key a write violated (P2003), e.g. `Link_folderId_fkey`; undefined for other errors. */
export function violatedForeignKey(error: unknown): string | undefined {
  const current = error as ErrorLike & { constraint?: unknown }
  // 23503: the same from a plain SQL statement (Database.sql), which names the constraint itself.
  if (current?.code === '23503') return typeof current.constraint === 'string' ? current.constraint : undefined
  if (current?.code !== 'P2003') return undefined
  const index = current.meta?.driverAdapterError?.cause?.constraint?.index
  return typeof index === 'string' ? index : undefined
}

/**
 * The connection to PostgreSQL broke after a write was sent: the server may have run and committed it (its answer
 * lost on the way) or not. Still a "database unavailable" error (its message carries the cause's); the caller that
 * can find out which (src/links/link-repository.ts) does so before answering.
 */
export class OutcomeUnknownError extends Error {
  override name = 'OutcomeUnknownError'
  constructor(cause: unknown) {
    super(`The connection broke before the write's outcome was known: ${(cause as Error)?.message ?? cause}`, { cause })
  }
}
