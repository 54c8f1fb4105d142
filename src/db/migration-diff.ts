/**
 * Offline migration tooling. The Prisma CLI's `migrate diff` needs a native engine that cannot be
 * downloaded here, so this uses the same engine compiled to WebAssembly, on an in-memory PGlite.
 *
 *   npm run db:diff -- <name>   writes prisma/migrations/<timestamp>_<name>/migration.sql
 *                               for whatever schema.prisma has that the migrations do not
 */
import { PGlite } from '@electric-sql/pglite'
import type { SchemaEngine as SchemaEngineType } from '@prisma/schema-engine-wasm'
import { createRequire } from 'node:module'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { PrismaPGlite } from 'pglite-prisma-adapter'
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils'
import { migrationsDirectory } from './migrate.js'

/**
 * The package's entry imports its .wasm file as an ES module, which Node 20 only does behind a flag;
 * instantiating the module by hand with the package's own glue code does the same without it.
 */
async function loadSchemaEngine(): Promise<typeof SchemaEngineType> {
  const entry = createRequire(import.meta.url).resolve('@prisma/schema-engine-wasm')
  const glue = await import(join(dirname(entry), 'schema_engine_bg.js'))
  const bytes = readFileSync(join(dirname(entry), 'schema_engine_bg.wasm'))
  // Node has WebAssembly; the TypeScript libraries this project uses do not declare it.
  const { WebAssembly } = globalThis as unknown as { WebAssembly: { instantiate: Function } }
  const { instance } = await WebAssembly.instantiate(bytes, { './schema_engine_bg.js': glue })
  glue.__wbg_set_wasm(instance.exports)
  ;(instance.exports.__wbindgen_start as () => void)()
  return glue.SchemaEngine
}

export function schemaPath(): string {
  return join(dirname(migrationsDirectory()), 'schema.prisma')
}

/** SQL that takes a database built by the committed migrations to what schema.prisma describes ('' when none). */
export async function diffMigrationsToSchema(): Promise<string> {
  const baseDir = migrationsDirectory()
  const lockPath = join(baseDir, 'migration_lock.toml')
  const pglite = new PGlite()
  const adapter = bindMigrationAwareSqlAdapterFactory(new PrismaPGlite(pglite))
  const SchemaEngine = await loadSchemaEngine()
  const engine = await SchemaEngine.new({ datamodels: undefined }, () => {}, adapter)
  try {
    const result = await engine.diff({
      from: {
        tag: 'migrations',
        baseDir,
        lockfile: { path: 'migration_lock.toml', content: existsSync(lockPath) ? readFileSync(lockPath, 'utf8') : null },
        shadowDbInitScript: '',
        migrationDirectories: readdirSync(baseDir, { withFileTypes: true })
          .filter((entry) => entry.isDirectory())
          .map((entry) => entry.name)
          .sort()
          .map((name) => ({
            path: name,
            migrationFile: {
              path: 'migration.sql',
              content: { tag: 'ok', value: readFileSync(join(baseDir, name, 'migration.sql'), 'utf8') },
            },
          })),
      },
      to: { tag: 'schemaDatamodel', files: [{ path: schemaPath(), content: readFileSync(schemaPath(), 'utf8') }] },
      script: true,
      exitCode: null,
      filters: { externalTables: [], externalEnums: [] },
    })
    const script = result.stdout ?? ''
    return script.includes('This is an empty migration') ? '' : script
  } finally {
    engine.free()
    await pglite.close()
  }
}

async function main(): Promise<void> {
  const name = process.argv[2]
  if (!name || !/^[a-z0-9_]+$/.test(name)) {
    console.error('usage: npm run db:diff -- <name>   (lower-case letters, digits and _)')
    process.exit(2)
  }
  const sql = await diffMigrationsToSchema()
  if (!sql.trim()) {
    console.error('schema.prisma and the migrations agree: nothing to write')
    return
  }
  const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14)
  const dir = join(migrationsDirectory(), `${stamp}_${name}`)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'migration.sql'), sql)
  console.log(dir)
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/'))) await main()
