/**
 * The servers of a load benchmark, each in a node process of its own so that its CPU and memory are its own,
 * compiled first as `npm start` runs the service (under tsx a process also holds its loader). The service
 * process runs with `npm start`'s environment and node flags (production-node.ts) plus BENCH_SERVICE_ARGS; a bare
 * reference with node's defaults. The parent talks to each over IPC: the server's first message (its port and
 * whatever else it reports) once it listens, then questions (`ask`) and `stop`.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { productionNode } from './production-node.js'

export type ChildServer<Ready> = Ready & { child: ChildProcess }

const projectRoot = fileURLToPath(new URL('../../', import.meta.url))

/**
 * The servers not stopped yet. A benchmark that fails (a run with errors throws) would otherwise leave them
 * running: holding a core, their ports, and the output pipe of a `npm run bench | grep …`, which then never ends.
 */
const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill()
})

/** Compiles the project (bench included) and returns the path of the compiled `bench/<name>.js`. */
export function compileBench(name: string): string {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.json', '--tsBuildInfoFile', 'dist/.tsbuildinfo.bench'], { cwd: projectRoot, stdio: 'inherit' })
  return `${projectRoot}dist/bench/${name}.js`
}

/**
 * Starts `script` with argument `mode`; `service` runs as production does. The child's standard output (a
 * service's log, which production sends down a pipe) is read and dropped when `pipeOutput` is set.
 */
export async function startServer<Ready>(
  script: string,
  mode: 'service' | 'bare',
  options: { env?: Record<string, string>; pipeOutput?: boolean } = {},
): Promise<ChildServer<Ready>> {
  const production = mode === 'service' ? productionNode() : { env: {}, execArgv: [] }
  const flags = mode === 'service' ? (process.env.BENCH_SERVICE_ARGS ?? '').split(' ').filter(Boolean) : []
  const child = fork(script, [mode], {
    execArgv: [...production.execArgv, ...flags],
    env: { ...process.env, ...production.env, ...options.env },
    stdio: ['ignore', options.pipeOutput ? 'pipe' : 'ignore', 'inherit', 'ipc'],
  })
  running.add(child)
  child.once('exit', () => running.delete(child))
  child.stdout?.resume()
  const [ready] = (await once(child, 'message')) as [Ready]
  return { ...ready, child }
}

export async function ask<T>(server: { child: ChildProcess }, question: string): Promise<T> {
  server.child.send(question)
  const [answer] = await once(server.child, 'message')
  return answer as T
}

export async function stop(server: { child: ChildProcess }): Promise<void> {
  const exited = once(server.child, 'exit')
  server.child.send('stop')
  await exited
}
