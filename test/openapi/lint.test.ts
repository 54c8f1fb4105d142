/**
 * The served OpenAPI document passes the two common linters with nothing to report: Redocly CLI with its
 * recommended rules and Spectral with spectral:oas. Both run from the project's pinned dev dependencies,
 * offline: Redocly's telemetry and update check are turned off, and the rulesets are built in. Any error,
 * warning, info or hint fails the test, with the linter's report as the diagnostic.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { buildTestApp } from '../support/test-app.js'

const run = promisify(execFile)
const BIN = fileURLToPath(new URL('../../node_modules/.bin/', import.meta.url))

/** The linter's exit code and output; a non-zero exit is a result here, not an exception. */
async function lint(command: string, args: string[], cwd: string) {
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' }
  try {
    const { stdout, stderr } = await run(join(BIN, command), args, { cwd, env, timeout: 120_000 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string }
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' }
  }
}

const { app } = await buildTestApp(t)
const dir = await mkdtemp(join(tmpdir(), 'openapi-lint-'))
t.teardown(() => rm(dir, { recursive: true, force: true }))
const served = await app.inject({ method: 'GET', url: '/openapi.json' })
await writeFile(join(dir, 'openapi.json'), served.body)

t.test('redocly lint (recommended): no problems', async (t) => {
  await writeFile(join(dir, 'redocly.yaml'), 'extends:\n  - recommended\n')
  const result = await lint('redocly', ['lint', 'openapi.json', '--format=json'], dir)
  const report = JSON.parse(result.stdout) as { totals: Record<string, number>; problems: { ruleId: string; message: string }[] }
  t.same(
    report.problems.map((problem) => `${problem.ruleId}: ${problem.message}`),
    [],
    'no errors, warnings or ignored problems',
  )
  t.same(report.totals, { errors: 0, warnings: 0, ignored: 0 })
  t.equal(result.code, 0, 'exit code 0')
})

t.test('spectral lint (spectral:oas): no problems', async (t) => {
  await writeFile(join(dir, '.spectral.yaml'), 'extends: ["spectral:oas"]\n')
  const result = await lint(
    'spectral',
    ['lint', 'openapi.json', '--ruleset', '.spectral.yaml', '--format', 'json', '--fail-severity', 'hint', '--quiet'],
    dir,
  )
  const problems = JSON.parse(result.stdout || '[]') as { code: string; message: string; path: string[] }[]
  t.same(
    problems.map((problem) => `${problem.code}: ${problem.message} (${problem.path.join('.')})`),
    [],
    'no errors, warnings, infos or hints',
  )
  t.equal(result.code, 0, 'exit code 0', { stderr: result.stderr })
})
