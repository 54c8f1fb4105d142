/**
 * The start-up log says where the quota counters live (contract section 8): without REDIS_URL, that they
 * are this process's own and several instances need Redis; with it, that they are in Redis.
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { openTestDatabase } from '../support/test-app.js'

const projectRoot = fileURLToPath(new URL('../../', import.meta.url))

/** Starts the real server (`src/server.ts`), collects its log lines until it listens, then stops it. */
async function startupLog(settings: Record<string, string>): Promise<Record<string, any>[]> {
  const { DATABASE_URL, DATA_DIR, REDIS_URL, ...env } = process.env
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: projectRoot,
    env: { ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...settings },
  })
  const lines: Record<string, any>[] = []
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  let buffered = ''
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening" line within 30 s; stderr: ${stderr}`)), 30_000)
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk
      const complete = buffered.split('\n')
      buffered = complete.pop() ?? ''
      for (const line of complete) {
        if (!line.trim()) continue
        const entry = JSON.parse(line)
        lines.push(entry)
        if (/listening/i.test(entry.msg)) {
          clearTimeout(timer)
          resolve()
        }
      }
    })
    child.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`the server exited (${code}) before listening; stderr: ${stderr}`))
    })
  })
  child.removeAllListeners('exit')
  const exited = new Promise((resolve) => child.on('exit', resolve))
  child.kill('SIGTERM')
  await exited
  return lines
}

// A database of the file's own: on the PostgreSQL server when there is one, else an embedded one both starts share.
const settings: Record<string, string> = process.env.DATABASE_URL ? { DATABASE_URL: (await openTestDatabase(t)).url! } : { DATA_DIR: t.testdir() }
const database = () => settings

t.test('without REDIS_URL: a warning that limits are per process', async (t) => {
  const lines = await startupLog(database())
  const line = lines.find((entry) => /rate limits: counters/.test(entry.msg))
  t.ok(line, 'a line about the rate-limit counters')
  t.equal(line?.level, 40, 'a warning')
  t.match(line?.msg, /this process only.*several instances need REDIS_URL/)
})

t.test('with REDIS_URL: the counters are in Redis', async (t) => {
  // The line is about the configuration: any Redis address will do, even one that does not answer.
  const lines = await startupLog({ ...database(), REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:1' })
  const line = lines.find((entry) => /rate limits: counters/.test(entry.msg))
  t.equal(line?.level, 30, 'information')
  t.match(line?.msg, /counters in Redis/)
})
