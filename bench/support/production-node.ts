/**
 * How `npm start` runs the server: the environment assignments and node flags of package.json's start script
 * (MALLOC_ARENA_MAX, --max-semi-space-size…), so that a benchmark measures the service as it is deployed.
 */
import { readFileSync } from 'node:fs'

export function productionNode(): { env: Record<string, string>; execArgv: string[] } {
  const { scripts } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } }
  const words = scripts.start.split(/\s+/)
  const node = words.indexOf('node')
  // The assignments before `exec node` (exec: the shell becomes node, so a SIGTERM to npm reaches it).
  const env = Object.fromEntries(words.slice(0, node).filter((word) => word.includes('=')).map((word) => word.split('=') as [string, string]))
  const execArgv = words.slice(node + 1).filter((word) => word.startsWith('--'))
  return { env, execArgv }
}
