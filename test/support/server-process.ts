/** The server as operators run it: a real process, started the way `npm start` does (from source here). */
import { spawn, type ChildProcess } from 'node:child_process'

export interface RunningServer {
  child: ChildProcess
  port: number
  /** Everything the process wrote so far, stdout and stderr. */
  output: () => string
}

export async function startServer(env: Record<string, string>): Promise<RunningServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
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
