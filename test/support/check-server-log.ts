/**
 * Run after the suite (`npm test`'s posttest): fails when an app of the suite logged a line at level error
 * that no test asked for (see SERVER_ERROR_LOG in test-app.ts), and prints those lines.
 */
import { existsSync, readFileSync } from 'node:fs'
import { SERVER_ERROR_LOG } from './test-app.js'

const lines = existsSync(SERVER_ERROR_LOG) ? readFileSync(SERVER_ERROR_LOG, 'utf8').split('\n').filter(Boolean) : []
if (lines.length > 0) {
  console.error(`${lines.length} server log line(s) at level error that no test asked for (${SERVER_ERROR_LOG}):`)
  for (const line of lines.slice(0, 20)) console.error(line)
  process.exit(1)
}
console.log('server log: no error line that a test did not ask for')
