import { createHash, randomUUID } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The little a migration needs from a connection: parameterised queries and multi-statement scripts. */
export interface SqlRunner {
  query(sql: string, params?: unknown[]): Promise<Record<string, unknown>[]>
  exec(sql: string): Promise<void>
}

export interface Migration {
  name: string
  sql: string
  checksum: string
}

// Prisma's own lock key and bookkeeping table, so `prisma migrate deploy` and this runner can take
// turns on the same database without applying a migration twice.
const PRISMA_ADVISORY_LOCK = 72707369
const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
  "id"                  VARCHAR(36) PRIMARY KEY NOT NULL,
  "checksum"            VARCHAR(64) NOT NULL,
  "finished_at"         TIMESTAMPTZ,
  "migration_name"      VARCHAR(255) NOT NULL,
  "logs"                TEXT,
  "rolled_back_at"      TIMESTAMPTZ,
  "started_at"          TIMESTAMPTZ NOT NULL DEFAULT now(),
  "applied_steps_count" INTEGER NOT NULL DEFAULT 0
)`

/** `prisma/migrations` of this package, found from this file whether it runs from src/ or dist/src/. */
export function migrationsDirectory(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'prisma', 'migrations'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('prisma/migrations not found above ' + fileURLToPath(import.meta.url))
    dir = parent
  }
  return join(dir, 'prisma', 'migrations')
}

/** The committed migrations in the order Prisma applies them (by directory name). */
export function readMigrations(directory = migrationsDirectory()): Migration[] {
  return readdirSync(directory, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(directory, entry.name, 'migration.sql')))
    .map((entry) => entry.name)
    .sort()
    .map((name) => {
      const sql = readFileSync(join(directory, name, 'migration.sql'), 'utf8')
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') }
    })
}

/** Applies every migration not yet recorded as finished, each in its own transaction; returns their names. */
export async function applyMigrations(db: SqlRunner, migrations = readMigrations()): Promise<string[]> {
  // Selecting a constant rather than the void result keeps every driver able to read the row.
  await db.query('SELECT 1 AS locked FROM (SELECT pg_advisory_lock($1)) AS lock', [PRISMA_ADVISORY_LOCK])
  try {
    await db.exec(CREATE_MIGRATIONS_TABLE)
    const rows = await db.query(
      'SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
    )
    const done = new Set(rows.map((row) => String(row.migration_name)))
    const applied: string[] = []
    for (const migration of migrations) {
      if (done.has(migration.name)) continue
      await db.exec('BEGIN')
      try {
        await db.exec(migration.sql)
        await db.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
           VALUES ($1, $2, $3, now(), now(), 1)`,
          [randomUUID(), migration.checksum, migration.name],
        )
        await db.exec('COMMIT')
      } catch (error) {
        await db.exec('ROLLBACK')
        throw new Error(`Migration ${migration.name} failed: ${(error as Error).message}`, { cause: error })
      }
      applied.push(migration.name)
    }
    return applied
  } finally {
    await db.query('SELECT pg_advisory_unlock($1)', [PRISMA_ADVISORY_LOCK])
  }
}
