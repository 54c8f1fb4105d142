const UNAVAILABLE_PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024'])
const UNAVAILABLE_MESSAGE =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|Connection terminated|timeout exceeded when trying to connect|Can't reach database|DatabaseNotReachable|connection is insecure|the database system is (starting up|shutting down)/i

/** True for errors that mean "the database cannot be reached" rather than "this query is wrong". */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let current = error as { name?: string; code?: unknown; message?: string; cause?: unknown } | undefined, depth = 0;
    current && depth < 5;
    current = current.cause as typeof current, depth++) {
    if (current.name === 'PrismaClientInitializationError') return true
    if (typeof current.code === 'string' && UNAVAILABLE_PRISMA_CODES.has(current.code)) return true
    if (typeof current.message === 'string' && UNAVAILABLE_MESSAGE.test(current.message)) return true
  }
  return false
}

/** True when a write failed on a unique constraint (P2002, whichever driver adapter reported it). */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown })?.code === 'P2002'
}
