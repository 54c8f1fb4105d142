/**
 * A server process whose open-file limit is low and which is sent more connections than it leaves room for: the
 * extra ones are dropped (logged), and the process goes on serving (src/plugins/http-server.ts connectionCap, and
 * src/plugins/overload.ts, whose memory reading threw EMFILE, uncaught, when every file was taken).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startServer } from '../support/server-process.js'

t.test('more connections than its open files allow: the extra ones are dropped, and the process serves on', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlinks-server-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const server = await startServer({ DATA_DIR: dataDir }, { fileLimit: 400 })
  t.teardown(() => server.child.kill('SIGKILL'))
  const sockets = await Promise.all(
    Array.from({ length: 500 }, () => new Promise<Socket>((resolve) => {
      const socket = connect(server.port, '127.0.0.1', () => {
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
        resolve(socket)
      })
      socket.on('error', () => resolve(socket))
    })),
  )
  // The overload check reads the process's memory every second: with no file left to open, that read threw (EMFILE),
  // uncaught, and the process shut down.
  await new Promise((resolve) => setTimeout(resolve, 3000))
  t.equal(server.child.exitCode, null, 'still running')
  for (const socket of sockets) socket.destroy()
  await new Promise((resolve) => setTimeout(resolve, 500))
  const health = await fetch(`http://127.0.0.1:${server.port}/healthz`)
  t.equal(health.status, 200, 'and answering')
  t.match(server.output(), /connections: at the most this process can hold/, 'the drops are logged')
  t.notMatch(server.output(), /EMFILE/)
})

