/** The server as operators run it: a real process, started the way `npm start` does (from source here). */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { openDatabase, type Database } from '../../src/db/database.js'
import { createWorkspaceToken, openTestDatabase } from './test-app.js'

export interface RunningServer {
  child: ChildProcess
  port: number
  /** Everything the process wrote so far, stdout and stderr. */
  output: () => string
}

/** `fileLimit`: the process's open-file limit (soft and hard, so that Node cannot raise it), set by the shell. */
export async function startServer(env: Record<string, string>, options: { fileLimit?: number } = {}): Promise<RunningServer> {
  const node = [process.execPath, '--import', 'tsx', 'src/server.ts']
  const [command, ...args] = options.fileLimit === undefined ? node : ['/bin/sh', '-c', `ulimit -n ${options.fileLimit} && exec "$@"`, 'sh', ...node]
  const child = spawn(command, args, {
    env: { PATH: process.env.PATH, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (chunk) => (output += chunk))
  child.stderr!.on('data', (chunk) => (output += chunk))
  const deadline = Date.now() + 60_000
  for (;;) {
    const match = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output)
    if (match) return { child, port: Number(match[1]), output: () => output }
    if (child.exitCode !== null) throw new Error(`server exited: ${output}`)
    if (Date.now() > deadline) throw new Error(`server did not start: ${output}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** The server's JSON log lines (the first-start token banner and other plain text are skipped). */
export function logLines(output: string): Record<string, any>[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line))
}

/** The test PostgreSQL when DATABASE_URL is set (a token made here), else an embedded database (its first-start token). */
export async function serverDatabase(t: Test, workspace = 'burst', defaultDomain = 'go.burst.test'): Promise<{ env: Record<string, string>; token: (output: string) => string; stored: () => Promise<Database> }> {
  if (process.env.DATABASE_URL) {
    const { database, url } = await openTestDatabase(t)
    const token = await createWorkspaceToken(database.prisma, { workspace, defaultDomain })
    return { env: { DATABASE_URL: url! }, token: () => token, stored: async () => database }
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlinks-drain-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  return {
    env: { DATA_DIR: dataDir },
    token: (output: string) => /\n {2}(sl_[A-Za-z0-9_-]{32})\n/.exec(output)![1],
    // One process at a time may open the directory: read it once the server has exited.
    stored: async (): Promise<Database> => {
      const database = await openDatabase({ dataDir })
      t.teardown(() => database.close())
      return database
    },
  }
}
