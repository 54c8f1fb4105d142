import { readFile, stat } from 'node:fs/promises'
import type { ParseArgsConfig } from 'node:util'
import type { Config } from '../config/config.js'
import type { PrismaClient } from '../db/database.js'
import { codePointLength } from '../../schemas/formats.js'
import {
  AdminError,
  addDomain,
  createFolder,
  createScript,
  createToken,
  createWorkspace,
  effectiveLimits,
  listTokens,
  MAX_SCRIPT_BYTES,
  revokeToken,
  setLimits,
} from '../workspaces/workspace-repository.js'

/** The command line itself is wrong (unknown command or option, missing or malformed argument): exit 2. */
export class UsageError extends Error {}

/** As long as the names of workspaces, folders and scripts: token:list prints it on the token's line. */
const TOKEN_LABEL_MAX = 100

export interface Args {
  values: Record<string, string | boolean | undefined>
  positionals: string[]
}

/** What a command does once the database is open; returns what it prints (nothing when empty). */
export type Action = (context: { prisma: PrismaClient; config: Config }) => Promise<string>

export interface Command {
  /** The arguments as the usage text shows them. */
  usage: string
  summary: string
  options: NonNullable<ParseArgsConfig['options']>
  /** Names of the positional arguments, all required. */
  positionals: string[]
  /** Checks the arguments (and reads any file) before the database is opened. */
  prepare(args: Args): Action | Promise<Action>
}

// PostgreSQL's integer, the type of the limit columns.
const MAX_LIMIT = 2_147_483_647

function option(args: Args, name: string, placeholder: string): string {
  const value = args.values[name]
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`missing --${name} ${placeholder}`)
  // Workspace names are stored trimmed, so " acme" must find "acme".
  return value.trim()
}

function count(args: Args, name: string): number | undefined {
  const value = args.values[name]
  if (value === undefined) return undefined
  if (typeof value !== 'string' || !/^\d+$/.test(value) || Number(value) > MAX_LIMIT) {
    throw new UsageError(`--${name} must be a whole number from 0 to ${MAX_LIMIT}, not "${value}"`)
  }
  return Number(value)
}

async function readScriptFile(path: string): Promise<string> {
  const file = await stat(path).catch((error: Error) => {
    throw new AdminError(`Cannot read the script file: ${error.message}`)
  })
  if (!file.isFile()) throw new AdminError(`${path} is not a file`)
  if (file.size > MAX_SCRIPT_BYTES) {
    throw new AdminError(`${path} has ${file.size} bytes; a script may hold at most 64 KiB (${MAX_SCRIPT_BYTES} bytes)`)
  }
  let content: string
  try {
    content = new TextDecoder('utf-8', { fatal: true }).decode(await readFile(path))
  } catch {
    throw new AdminError(`${path} is not UTF-8 text`)
  }
  // PostgreSQL text cannot hold NUL, and a script that has one is not HTML or JavaScript anyway.
  if (content.includes('\0')) throw new AdminError(`${path} is not a text file`)
  if (content.trim() === '') throw new AdminError(`${path} is empty`)
  return content
}

const workspaceOption = { workspace: { type: 'string' } } as const

export const commands: Record<string, Command> = {
  'workspace:create': {
    usage: '<name>',
    summary: 'creates a workspace; prints its id',
    options: {},
    positionals: ['<name>'],
    prepare: ({ positionals: [name] }) => async ({ prisma }) => String((await createWorkspace(prisma, name)).id),
  },

  'token:create': {
    usage: '--workspace <name> [--official] [--label <text>]',
    summary: 'creates a token (and the workspace if needed); prints the token',
    options: { ...workspaceOption, official: { type: 'boolean' }, label: { type: 'string' } },
    positionals: [],
    prepare(args) {
      const workspace = option(args, 'workspace', '<name>')
      const label = typeof args.values.label === 'string' ? args.values.label.trim() : ''
      // token:list prints one line per token, tab-separated.
      if (/[\x00-\x1f\x7f]/.test(label)) throw new UsageError('--label must be one line of text without tabs')
      if (codePointLength(label) > TOKEN_LABEL_MAX) throw new UsageError(`--label must be at most ${TOKEN_LABEL_MAX} characters`)
      const official = args.values.official === true
      return async ({ prisma }) => (await createToken(prisma, { workspace, official, label: label || undefined })).token
    },
  },

  'token:revoke': {
    usage: '<token-or-prefix>',
    summary: 'revokes a token; prints its prefix',
    options: {},
    positionals: ['<token-or-prefix>'],
    prepare: ({ positionals: [text] }) => ({ prisma }) => revokeToken(prisma, text),
  },

  'token:list': {
    usage: '--workspace <name>',
    summary: 'lists tokens: prefix, label, official|standard, created, revoked|active (tab-separated)',
    options: workspaceOption,
    positionals: [],
    prepare(args) {
      const workspace = option(args, 'workspace', '<name>')
      return async ({ prisma }) =>
        (await listTokens(prisma, workspace))
          .map((token) =>
            [
              token.prefix,
              token.label || '-',
              token.official ? 'official' : 'standard',
              token.createdAt.toISOString(),
              token.revokedAt?.toISOString() ?? 'active',
            ].join('\t'),
          )
          .join('\n')
    },
  },

  'domain:add': {
    usage: '--workspace <name> <host> [--default]',
    summary: "adds a short domain to the workspace; prints it as stored (lower-case, punycode)",
    options: { ...workspaceOption, default: { type: 'boolean' } },
    positionals: ['<host>'],
    prepare(args) {
      const workspace = option(args, 'workspace', '<name>')
      const [host] = args.positionals
      const isDefault = args.values.default === true
      return async ({ prisma, config }) =>
        (await addDomain(prisma, { workspace, host, isDefault, reservedDomains: config.reservedDomains })).host
    },
  },

  'folder:create': {
    usage: '--workspace <name> <folder-name>',
    summary: 'creates a folder; prints its id',
    options: workspaceOption,
    positionals: ['<folder-name>'],
    prepare(args) {
      const workspace = option(args, 'workspace', '<name>')
      const [name] = args.positionals
      return async ({ prisma }) => String((await createFolder(prisma, { workspace, name })).id)
    },
  },

  'script:create': {
    usage: '--workspace <name> --name <text> --file <path>',
    summary: 'stores an HTML/JS snippet of at most 64 KiB; prints its id',
    options: { ...workspaceOption, name: { type: 'string' }, file: { type: 'string' } },
    positionals: [],
    async prepare(args) {
      const workspace = option(args, 'workspace', '<name>')
      const name = option(args, 'name', '<text>')
      const content = await readScriptFile(option(args, 'file', '<path>'))
      return async ({ prisma }) => String((await createScript(prisma, { workspace, name, content })).id)
    },
  },

  'limits:set': {
    usage: '--workspace <name> [--hour N] [--day N]',
    summary: 'sets the workspace\'s hourly and daily quotas; prints "hour=N day=N"',
    options: { ...workspaceOption, hour: { type: 'string' }, day: { type: 'string' } },
    positionals: [],
    prepare(args) {
      const workspace = option(args, 'workspace', '<name>')
      const hour = count(args, 'hour')
      const day = count(args, 'day')
      if (hour === undefined && day === undefined) throw new UsageError('give --hour N, --day N or both')
      return async ({ prisma }) => {
        const limits = effectiveLimits(await setLimits(prisma, { workspace, hour, day }))
        return `hour=${limits.hour} day=${limits.day}`
      }
    },
  },
}
