/**
 * The administrative command line: `npm run --silent cli -- <command>`. Each command prints its result
 * alone on stdout so scripts can capture it; errors are one line on stderr, exit 2 for a wrong command
 * line and 1 for anything else (unknown workspace, unreadable file, database in use...).
 */
import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { ConfigError, loadConfig, type Config } from '../config/config.js'
import { openDatabase, type Database } from '../db/database.js'
import { DataDirInUseError } from '../db/data-dir-lock.js'
import { errorText, oneLine } from '../errors/error-text.js'
import { AdminError } from '../workspaces/workspace-repository.js'
import { commands, UsageError, type Action, type Args, type Command } from './commands.js'

export interface CliIo {
  stdout: { write(text: string): unknown }
  stderr: { write(text: string): unknown }
}

export interface CliOptions {
  /** Environment the configuration is read from; default process.env (and .env), as for the server. */
  env?: NodeJS.ProcessEnv
  /** A configuration to use instead of reading one. */
  config?: Config
  /** An open database to use instead of opening one; it is left open. */
  database?: Database
}

const HELP = new Set(['help', '--help', '-h'])

export function usage(): string {
  const names = Object.keys(commands)
  const width = Math.max(...names.map((name) => `${name} ${commands[name].usage}`.length))
  const lines = names.map((name) => `  ${`${name} ${commands[name].usage}`.padEnd(width)}  ${commands[name].summary}`)
  return [
    'Usage: npm run --silent cli -- <command> [arguments]',
    '',
    'Commands:',
    ...lines,
    '',
    'Configuration comes from the environment (or .env), as for the server: DATABASE_URL, or the embedded',
    'database in DATA_DIR (default ./data). Pending migrations are applied first.',
    '',
  ].join('\n')
}

/** Runs one command line; returns the exit code. */
export async function runCli(argv: string[], io: CliIo = process, options: CliOptions = {}): Promise<number> {
  const [name, ...rest] = argv
  // Asked for, the usage is the result (standard output); without a command it is an error (standard error), which
  // a script capturing the output must not take for a result.
  if (name === undefined) {
    io.stderr.write(usage())
    return 2
  }
  if (HELP.has(name)) {
    io.stdout.write(usage())
    return 0
  }
  try {
    const command = Object.hasOwn(commands, name) ? commands[name] : undefined
    if (!command) throw new UsageError(`Unknown command "${name}"; run "npm run --silent cli -- help" for the list`)
    let action: Action
    try {
      const args = parseCommandLine(command, rest)
      if (args.values.help) {
        io.stdout.write(`Usage: npm run --silent cli -- ${name} ${command.usage}\n`)
        return 0
      }
      action = await command.prepare(args)
    } catch (error) {
      if (error instanceof UsageError) throw new UsageError(`${name}: ${error.message} (usage: ${name} ${command.usage})`)
      throw error
    }
    const output = await withDatabase(options, action)
    if (output !== '') io.stdout.write(`${output}\n`)
    return 0
  } catch (error) {
    io.stderr.write(`${describe(error)}\n`)
    return error instanceof UsageError ? 2 : 1
  }
}

function parseCommandLine(command: Command, argv: string[]): Args {
  let args: Args & { tokens?: { kind: string; name?: string }[] }
  try {
    args = parseArgs({
      args: argv,
      options: { ...command.options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
      tokens: true,
    })
  } catch (error) {
    // node:util reports a malformed command line as a TypeError with an ERR_PARSE_ARGS_* code.
    if (!String((error as NodeJS.ErrnoException).code).startsWith('ERR_PARSE_ARGS')) throw error
    throw new UsageError(oneLine((error as Error).message))
  }
  if (args.values.help) return args
  // parseArgs keeps the last of a repeated option: `--workspace acme --workspace other` would quietly act on
  // "other", which the operator may not have meant.
  const seen = new Set<string>()
  for (const token of args.tokens ?? []) {
    if (token.kind !== 'option' || token.name === undefined) continue
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given more than once`)
    seen.add(token.name)
  }
  const missing = command.positionals[args.positionals.length]
  if (missing) throw new UsageError(`missing ${missing}`)
  const extra = args.positionals[command.positionals.length]
  if (extra !== undefined) throw new UsageError(`unexpected argument "${extra}"`)
  // A blank argument is a missing one, as a blank option value is.
  const blank = command.positionals.find((_, i) => args.positionals[i].trim() === '')
  if (blank) throw new UsageError(`missing ${blank}`)
  return args
}

async function withDatabase(options: CliOptions, action: Action): Promise<string> {
  const config = options.config ?? loadConfig(options.env)
  if (options.database) return action({ prisma: options.database.prisma, config })
  let database: Database
  try {
    database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir })
  } catch (error) {
    if (error instanceof DataDirInUseError) throw error
    throw new AdminError(`Cannot open the database: ${errorText(error)}`)
  }
  try {
    return await action({ prisma: database.prisma, config })
  } finally {
    await database.close()
  }
}

function describe(error: unknown): string {
  const expected = [UsageError, AdminError, ConfigError, DataDirInUseError]
  if (expected.some((type) => error instanceof type)) return oneLine((error as Error).message)
  return `Unexpected error: ${errorText(error)}`
}

function isEntryPoint(): boolean {
  try {
    return process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href
  } catch {
    return false
  }
}

if (isEntryPoint()) {
  // exitCode, not exit(): stdout may be a pipe that still has to be flushed.
  process.exitCode = await runCli(process.argv.slice(2))
}
