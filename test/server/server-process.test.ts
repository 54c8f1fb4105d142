/**
 * The server as operators run it: a real process, started the way `npm start` does (from source here),
 * on the embedded database or the test PostgreSQL.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openDatabase } from '../../src/db/database.js'
import { startServer } from '../support/server-process.js'
import { openTestDatabase } from '../support/test-app.js'

t.test('first start on an empty embedded database prints a token once; SIGTERM lets in-flight requests finish', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlinks-server-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const server = await startServer({ DATA_DIR: dataDir })
  t.teardown(() => server.child.kill('SIGKILL'))
  const token = /\n {2}(sl_[A-Za-z0-9_-]{32})\n/.exec(server.output())?.[1]
  t.ok(token, 'the development token is printed')
  t.equal(server.output().split(token!).length, 2, 'exactly once')
  t.notMatch(server.output().split('\n').filter((line) => line.startsWith('{')).join('\n'), token!, 'and never in a log line')

  // Start a request and leave its body unfinished, so it is in flight when SIGTERM arrives.
  const body = JSON.stringify({ link: { url: 'https://example.com/in-flight', id: 'inflight' } })
  const pending = request({
    port: server.port,
    host: '127.0.0.1',
    method: 'POST',
    path: '/v1/links/create',
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'api-authorization': token },
  })
  const responded = once(pending, 'response')
  pending.write(body.slice(0, 10))
  await new Promise((resolve) => setTimeout(resolve, 300))
  server.child.kill('SIGTERM')
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal(server.child.exitCode, null, 'the process waits for the request in flight')
  pending.end(body.slice(10))
  const [response] = (await responded) as [import('node:http').IncomingMessage]
  let text = ''
  for await (const chunk of response) text += chunk
  t.equal(response.statusCode, 201, text)
  const [code] = await once(server.child, 'exit')
  t.equal(code, 0, 'then it exits cleanly')
  t.match(server.output(), /SIGTERM received/)

  const database = await openDatabase({ dataDir })
  t.teardown(() => database.close())
  t.equal((await database.prisma.link.findFirst({ where: { slugKey: 'inflight' } }))?.url, 'https://example.com/in-flight')
  t.equal(await database.prisma.workspace.count(), 1, 'the first-start workspace')
})

t.test('a second start does not create another token', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlinks-server-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  for (const expectToken of [true, false]) {
    const server = await startServer({ DATA_DIR: dataDir })
    t.equal(/sl_[A-Za-z0-9_-]{32}/.test(server.output()), expectToken)
    server.child.kill('SIGTERM')
    t.equal((await once(server.child, 'exit'))[0], 0)
  }
})

t.test('a second process on the same embedded database is refused plainly', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlinks-server-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const first = await startServer({ DATA_DIR: dataDir })
  t.teardown(() => first.child.kill('SIGKILL'))
  const second = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: { PATH: process.env.PATH, PORT: '0', DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  second.stderr.on('data', (chunk) => (output += chunk))
  const [code] = await once(second, 'exit')
  t.equal(code, 1)
  t.match(output, /in use by process \d+/)
  first.child.kill('SIGTERM')
  await once(first.child, 'exit')
})

t.test('an invalid configuration stops the start with a message naming the variable', async (t) => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: { PATH: process.env.PATH, PORT: 'eighty' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stderr.on('data', (chunk) => (output += chunk))
  const [code] = await once(child, 'exit')
  t.equal(code, 1)
  t.match(output, /PORT must be a whole number/)
})

/** Starts the server with `env` and waits for it to fail; its exit code and what it wrote. */
async function failedStart(env: Record<string, string>): Promise<{ code: number; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], { env: { PATH: process.env.PATH, PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (chunk) => (output += chunk))
  child.stderr.on('data', (chunk) => (output += chunk))
  const [code] = await once(child, 'exit')
  return { code, output }
}

t.test('a start that cannot listen or open its database says which variable to change, in one line, without a stack', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlinks-server-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const cases: [Record<string, string>, RegExp][] = [
    [{ DATA_DIR: dataDir, HOST: '999.1.1.1' }, /^Could not start: cannot listen on HOST 999\.1\.1\.1, PORT 0: .*ENOTFOUND/m],
    [{ DATA_DIR: join(dataDir, 'no', 'such'), HOST: '127.0.0.1', DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/none' }, /^Could not start: cannot open the database \(DATABASE_URL\): .*ECONNREFUSED/m],
  ]
  for (const [env, message] of cases) {
    const { code, output } = await failedStart(env)
    t.equal(code, 1, JSON.stringify(env))
    t.match(output, message)
    t.notMatch(output, /\n\s+at /, 'no stack trace')
  }

  // The first of those starts had made the workspace and printed its token before it failed to listen: spent on a
  // failed start, it would be lost among the error's lines. The next start makes the workspace again and prints a new one.
  const server = await startServer({ DATA_DIR: dataDir })
  t.teardown(() => server.child.kill('SIGKILL'))
  const token = /\n {2}(sl_[A-Za-z0-9_-]{32})\n/.exec(server.output())?.[1]
  t.ok(token, 'the next start prints a token')
  const listed = await fetch(`http://127.0.0.1:${server.port}/v1/links`, { headers: { 'api-authorization': token ?? '' } })
  t.equal(listed.status, 200, 'which works')
  server.child.kill('SIGTERM')
  await once(server.child, 'exit')
})

t.test('the first start says so when go.localhost is reserved and the workspace has no domain of its own', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlinks-server-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const server = await startServer({ DATA_DIR: dataDir, RESERVED_DOMAINS: 'short.localhost,go.localhost' })
  t.teardown(() => server.child.kill('SIGKILL'))
  t.match(server.output(), /created workspace "default" \(no domain of its own: go\.localhost is in RESERVED_DOMAINS/)
  server.child.kill('SIGTERM')
  await once(server.child, 'exit')
})

t.test('with DATABASE_URL the server applies migrations to a fresh database and serves', { skip: !process.env.DATABASE_URL && 'DATABASE_URL is not set' }, async (t) => {
  const { url } = await openTestDatabase(t)
  const server = await startServer({ DATABASE_URL: url! })
  t.teardown(() => server.child.kill('SIGKILL'))
  t.notMatch(server.output(), /sl_[A-Za-z0-9_-]{32}/, 'no development token on a real PostgreSQL')
  const response = await fetch(`http://127.0.0.1:${server.port}/readyz`)
  t.equal(response.status, 200)
  server.child.kill('SIGTERM')
  t.equal((await once(server.child, 'exit'))[0], 0)
})
