/**
 * What a crash loses (`npm run bench:visit-loss`): the service (compiled, as `npm start` runs it) on a database
 * of its own, loaded with visits by autocannon for a few seconds, then killed with SIGKILL while under load.
 * Prints the visits answered, the visits stored and the difference: what was buffered and not yet written.
 * Needs PostgreSQL (DATABASE_URL): the stored visits are counted once the process is gone.
 *
 * Options (environment): BENCH_DURATION (s of load before the kill, default 4), BENCH_CONNECTIONS (default 20).
 */
import autocannon from 'autocannon'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { createWorkspaceToken, openTestDatabase } from '../test/support/test-app.js'

const DURATION = Number(process.env.BENCH_DURATION ?? 4)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20)
const projectRoot = fileURLToPath(new URL('../', import.meta.url))

if (!process.env.DATABASE_URL) throw new Error('bench:visit-loss needs DATABASE_URL')
const teardowns: (() => unknown)[] = []
const { database, url } = await openTestDatabase({ teardown: (fn) => teardowns.unshift(fn) })
await createWorkspaceToken(database.prisma, { workspace: 'loss', domains: ['go.loss.test'] })
await database.prisma.$executeRawUnsafe(
  `INSERT INTO "Link" ("workspaceId", "domain", "slug", "slugKey", "url", "updatedAt")
   SELECT w."id", 'go.loss.test', 'l' || g, 'l' || g, 'https://example.com/' || g, now() FROM "Workspace" w, generate_series(1, 100) g WHERE w."name" = 'loss'`,
)

execFileSync('npm', ['run', '--silent', 'build'], { cwd: projectRoot, stdio: 'inherit' })
const child = spawn(process.execPath, ['dist/src/server.js'], {
  cwd: projectRoot,
  env: { PATH: process.env.PATH, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: url! },
  stdio: ['ignore', 'pipe', 'inherit'],
})
let output = ''
child.stdout!.on('data', (chunk) => (output += chunk))
let port = 0
while (!port) {
  await new Promise((resolve) => setTimeout(resolve, 100))
  port = Number(/Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output)?.[1] ?? 0)
}

let answered = 0
const load = autocannon({
  url: `http://127.0.0.1:${port}`,
  connections: CONNECTIONS,
  duration: DURATION + 2,
  headers: { host: 'go.loss.test', 'user-agent': 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0 Safari/537.36' },
  requests: [{ method: 'GET', setupRequest: (request) => ({ ...request, path: `/l${1 + Math.floor(Math.random() * 100)}` }) }],
}, () => {})
load.on('response', (_client: unknown, statusCode: number) => {
  if (statusCode === 302) answered++
})
await new Promise((resolve) => setTimeout(resolve, DURATION * 1000))
const answeredAtKill = answered
child.kill('SIGKILL')
await once(child, 'exit')
load.stop()
const [{ stored }] = await database.prisma.$queryRawUnsafe<{ stored: number }[]>(`SELECT count(*)::int AS "stored" FROM "analytics"."Visit"`)
const rate = answeredAtKill / DURATION
console.log(`visits answered before SIGKILL: ${answeredAtKill} (about ${rate.toFixed(0)}/s over ${DURATION} s)`)
console.log(`visits stored: ${stored}`)
console.log(`lost in the crash: ${answeredAtKill - stored} (${((answeredAtKill - stored) / rate).toFixed(2)} s of visits at that rate)`)
for (const teardown of teardowns) await teardown()
