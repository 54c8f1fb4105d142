/**
 * The real command line as a child process: configured by the environment, migrating a fresh database,
 * printing only the token, and refusing an embedded database that another process holds.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { hashToken } from '../../src/auth/tokens.js'
import { openDatabase } from '../../src/db/database.js'
import { openTestDatabase } from '../support/test-app.js'

const projectRoot = fileURLToPath(new URL('../../', import.meta.url))

/** Runs `node --import tsx src/cli/main.ts <argv>` with only the given database settings. */
function runCliProcess(argv: string[], settings: { DATABASE_URL?: string; DATA_DIR?: string }) {
  const { DATABASE_URL, DATA_DIR, ...env } = process.env
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...argv], {
    cwd: projectRoot,
    env: { ...env, ...settings },
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

t.test('token:create in a child process prints only the token', async (t) => {
  if (process.env.DATABASE_URL) {
    const { database, url } = await openTestDatabase(t)
    const result = await runCliProcess(['token:create', '--workspace', 'x'], { DATABASE_URL: url })
    t.equal(result.code, 0, result.stderr)
    t.match(result.stdout, /^sl_[A-Za-z0-9_-]{32}\n$/)
    t.ok(await database.prisma.apiToken.findUnique({ where: { hash: hashToken(result.stdout.trim()) } }), 'stored')
    return
  }

  // A fresh embedded database: the command creates and migrates it, then closes and unlocks it.
  const dataDir = t.testdir()
  const result = await runCliProcess(['token:create', '--workspace', 'x'], { DATA_DIR: dataDir })
  t.equal(result.code, 0, result.stderr)
  t.match(result.stdout, /^sl_[A-Za-z0-9_-]{32}\n$/)
  t.notOk(existsSync(join(dataDir, 'shortlinks.lock')), 'lock released')
  const database = await openDatabase({ dataDir })
  t.teardown(() => database.close())
  t.ok(await database.prisma.apiToken.findUnique({ where: { hash: hashToken(result.stdout.trim()) } }), 'stored')
})

t.test('an embedded data dir locked by a live process: exit 1, "in use"', async (t) => {
  // The lock code takes over a lock holding its own pid, so the holder must be another live process.
  const holder = spawn('sleep', ['30'])
  t.teardown(() => {
    holder.kill()
  })
  const dataDir = t.testdir()
  const lockFile = join(dataDir, 'shortlinks.lock')
  writeFileSync(lockFile, String(holder.pid))

  const result = await runCliProcess(['token:create', '--workspace', 'x'], { DATA_DIR: dataDir })
  t.equal(result.code, 1)
  t.equal(result.stdout, '')
  t.ok(result.stderr.startsWith(`The embedded database in ${dataDir} is in use by process ${holder.pid} `), result.stderr)
  t.match(result.stderr, /^[^\n]+\n$/, 'one line, no stack trace')
  t.equal(readFileSync(lockFile, 'utf8'), String(holder.pid), 'the lock is left to its holder')
})
