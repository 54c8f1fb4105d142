/**
 * Stop signals as they reach a real server process (started the way `npm start` does, from source here, on an
 * embedded database): npm's forwarded copy of a signal, and an operator who insists. A file of its own, so that it
 * runs beside the other server-process tests rather than after them.
 */
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startServer } from '../support/server-process.js'

t.test('a signal sent twice at once (npm forwarding what the whole process group got) closes gracefully; again later, it exits at once', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlinks-server-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const server = await startServer({ DATA_DIR: dataDir })
    t.teardown(() => server.child.kill('SIGKILL'))
    server.child.kill(signal)
    server.child.kill(signal)
    const [code] = await once(server.child, 'exit')
    t.equal(code, 0, `${signal} twice at once: a clean exit`)
    t.match(server.output(), /the buffered visits are written/, 'after the whole close')
    t.notMatch(server.output(), /second SIG/)
  }
  // An operator who insists (Ctrl-C again, a second stop) is obeyed at once.
  const otherDir = mkdtempSync(join(tmpdir(), 'shortlinks-server-'))
  t.teardown(() => rmSync(otherDir, { recursive: true, force: true }))
  const server = await startServer({ DATA_DIR: otherDir })
  t.teardown(() => server.child.kill('SIGKILL'))
  const token = /\n {2}(sl_[A-Za-z0-9_-]{32})\n/.exec(server.output())![1]
  /** A create in flight (its body unfinished): it keeps the close going past the signals that follow. */
  const holdCreate = async (port: number) => {
    const pending = request({
      port, host: '127.0.0.1', method: 'POST', path: '/v1/links/create',
      headers: { 'content-type': 'application/json', 'content-length': 100, 'api-authorization': token },
    })
    pending.on('error', () => {})
    pending.write('{')
    await new Promise((resolve) => setTimeout(resolve, 300))
  }
  await holdCreate(server.port)
  server.child.kill('SIGINT')
  await new Promise((resolve) => setTimeout(resolve, 1500))
  server.child.kill('SIGINT')
  const [code] = await once(server.child, 'exit')
  t.equal(code, 1, 'a second SIGINT a moment later exits at once')
  t.match(server.output(), /second SIGINT, exiting/)

  // Ctrl-C twice in quick succession under npm: the first press's two copies, then the second press, obeyed.
  // (A moment apart: signals of one kind sent at the same instant may reach a process as one.)
  const quick = await startServer({ DATA_DIR: otherDir })
  t.teardown(() => quick.child.kill('SIGKILL'))
  await holdCreate(quick.port)
  const exited = once(quick.child, 'exit')
  for (let i = 0; i < 3; i++) {
    quick.child.kill('SIGINT')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const [quickCode] = await exited
  t.equal(quickCode, 1, 'a third SIGINT within the second exits at once')
  t.match(quick.output(), /SIGINT again at once: taken for the copy npm forwards/)
})
