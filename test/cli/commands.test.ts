/**
 * Every command of the command line, run in-process through runCli against a database of this file's own
 * (PostgreSQL when DATABASE_URL is set, else an in-memory PGlite). test/cli/process.test.ts runs the real
 * process.
 */
import { join } from 'node:path'
import t from 'tap'
import { hashToken } from '../../src/auth/tokens.js'
import { runCli, type CliOptions } from '../../src/cli/main.js'
import { openTestDatabase, testConfig } from '../support/test-app.js'

const TOKEN_LINE = /^sl_[A-Za-z0-9_-]{32}\n$/

interface Result {
  code: number
  stdout: string
  stderr: string
}

async function run(argv: string[], options: CliOptions = {}): Promise<Result> {
  const result = { stdout: '', stderr: '' }
  const code = await runCli(
    argv,
    { stdout: { write: (text: string) => (result.stdout += text) }, stderr: { write: (text: string) => (result.stderr += text) } },
    options,
  )
  return { code, ...result }
}

// One database for the file (opening one is slow); each test below uses workspaces of its own.
const { database } = await openTestDatabase(t)
const prisma = database.prisma
const config = testConfig()
const cli = (...argv: string[]) => run(argv, { database, config })

type Assert = Pick<typeof t, 'equal' | 'match'>

/** Exit code, nothing on stdout, and one line on stderr that says what is wrong. */
function fails(t: Assert, result: Result, code: 1 | 2, message: RegExp) {
  t.equal(result.code, code, `exit ${code}`)
  t.equal(result.stdout, '', 'nothing on stdout')
  t.match(result.stderr, /^[^\n]+\n$/, 'one line on stderr')
  t.match(result.stderr, message)
}

t.test('help and usage errors', async (t) => {
  const help = await run(['help'])
  t.equal(help.code, 0)
  t.equal(help.stderr, '')
  for (const name of ['workspace:create', 'token:create', 'token:revoke', 'token:list', 'domain:add', 'folder:create', 'script:create', 'limits:set']) {
    t.match(help.stdout, `  ${name} `, `usage lists ${name}`)
  }
  t.same(await run(['--help']), help, '--help is help')

  const none = await run([])
  t.equal(none.code, 2, 'no command: exit 2')
  t.equal(none.stderr, help.stdout, 'no command: the usage, on standard error')
  t.equal(none.stdout, '', 'nothing a script capturing the result could take for one')

  t.same(await run(['token:create', '--help']), {
    code: 0,
    stdout: 'Usage: npm run --silent cli -- token:create --workspace <name> [--official] [--label <text>]\n',
    stderr: '',
  })

  fails(t, await run(['token:make', '--workspace', 'x']), 2, /Unknown command "token:make"/)
  fails(t, await run(['constructor']), 2, /Unknown command "constructor"/)
  fails(t, await run(['token:create', '--workspace', 'x', '--admin']), 2, /token:create: Unknown option '--admin'.*\(usage: token:create --workspace/)
  fails(t, await run(['token:create', '--workspace']), 2, /token:create: Option '--workspace <value>' argument missing/)
  fails(t, await run(['token:create', '--official=yes', '--workspace', 'x']), 2, /'--official' does not take an argument/)
  // The last of a repeated option would win, quietly acting on a workspace the operator may not have meant.
  fails(t, await cli('token:create', '--workspace', 'rep-acme', '--workspace', 'rep-other'), 2, /token:create: --workspace is given more than once/)
  fails(t, await cli('limits:set', '--workspace', 'rep-acme', '--hour', '1', '--hour', '2'), 2, /--hour is given more than once/)
  t.equal(await prisma.workspace.count({ where: { name: { startsWith: 'rep-' } } }), 0, 'nothing was created')
})

t.test('commands racing each other for one name: one wins, the other says why in one line', async (t) => {
  await cli('workspace:create', 'race-a')
  await cli('workspace:create', 'race-b')
  for (let round = 0; round < 5; round++) {
    // Two workspaces adding one host at the same time, each as its default: one owns it, the other fails.
    const host = `race${round}.example`
    const asDefault = round % 2 === 0 ? ['--default'] : []
    const [a, b] = await Promise.all([
      cli('domain:add', '--workspace', 'race-a', host, ...asDefault),
      cli('domain:add', '--workspace', 'race-b', host, ...asDefault),
    ])
    t.same([a.code, b.code].sort(), [0, 1], `${host}: one succeeds`)
    const loser = a.code === 1 ? a : b
    t.match(loser.stderr, /belongs to another workspace/)
    const owner = await prisma.domain.findUniqueOrThrow({ where: { host }, select: { workspace: { select: { name: true } }, isDefault: true } })
    t.equal(owner.workspace.name, a.code === 0 ? 'race-a' : 'race-b', 'the one that said so owns it')
    // One workspace adding the same host twice at once: both say it is added.
    const same = await Promise.all([cli('domain:add', '--workspace', 'race-a', `same${round}.example`), cli('domain:add', '--workspace', 'race-a', `same${round}.example`)])
    t.same(same.map((result) => result.code), [0, 0], 'adding its own host twice succeeds twice')
    // Two defaults at once in a workspace that has none yet: one default in the end.
    await cli('workspace:create', `race-d${round}`)
    const defaults = await Promise.all([
      cli('domain:add', '--workspace', `race-d${round}`, `d${round}-a.example`, '--default'),
      cli('domain:add', '--workspace', `race-d${round}`, `d${round}-b.example`, '--default'),
    ])
    t.same(defaults.map((result) => result.code), [0, 0])
    t.equal(await prisma.domain.count({ where: { workspace: { name: `race-d${round}` }, isDefault: true } }), 1, 'one default domain')

    // The same new workspace, by two token:create at once: both get a token for it.
    const [first, second] = await Promise.all([cli('token:create', '--workspace', `race-new${round}`), cli('token:create', '--workspace', `race-new${round}`)])
    t.same([first.code, second.code], [0, 0])
    t.equal(await prisma.apiToken.count({ where: { workspace: { name: `race-new${round}` } } }), 2)

    const made = await Promise.all([cli('workspace:create', `race-ws${round}`), cli('workspace:create', `race-ws${round}`)])
    t.same(made.map((result) => result.code).sort(), [0, 1])
    t.match(made.find((result) => result.code === 1)!.stderr, /^A workspace named "race-ws\d" already exists\n$/)

    const folders = await Promise.all([cli('folder:create', '--workspace', 'race-a', `F${round}`), cli('folder:create', '--workspace', 'race-a', `F${round}`)])
    t.same(folders.map((result) => result.code).sort(), [0, 1])
    t.match(folders.find((result) => result.code === 1)!.stderr, /^The workspace already has a folder named "F\d"/)
  }
  // The losers' default domains were left alone: each workspace has at most one default, its own.
  for (const name of ['race-a', 'race-b']) {
    const defaults = await prisma.domain.findMany({ where: { workspace: { name }, isDefault: true } })
    t.ok(defaults.length <= 1, `${name}: at most one default domain`)
  }
})

t.test('configuration and database errors are one plain line, exit 1', async (t) => {
  fails(t, await run(['workspace:create', 'acme'], { env: { DATABASE_URL: 'mysql://db/x' } }), 1, /DATABASE_URL/)
  fails(
    t,
    await run(['workspace:create', 'acme'], { env: { DATABASE_URL: 'postgresql://127.0.0.1:1/none' } }),
    1,
    /^Cannot open the database: .*ECONNREFUSED/,
  )
})

t.test('workspace:create', async (t) => {
  const created = await cli('workspace:create', 'wc-acme')
  t.match(created, { code: 0, stderr: '' })
  t.match(created.stdout, /^\d+\n$/, 'stdout is only the id')
  t.same(await prisma.workspace.findUnique({ where: { id: Number(created.stdout) }, select: { name: true } }), { name: 'wc-acme' })

  fails(t, await cli('workspace:create', 'wc-acme'), 1, /A workspace named "wc-acme" already exists/)
  fails(t, await cli('workspace:create', '  '), 2, /workspace:create: missing <name>/)
  fails(t, await cli('workspace:create'), 2, /workspace:create: missing <name>/)
  fails(t, await cli('workspace:create', 'wc-a', 'wc-b'), 2, /unexpected argument "wc-b"/)
  fails(t, await cli('workspace:create', `wc-${'x'.repeat(98)}`), 1, /^A workspace name may have at most 100 characters\n$/)
  fails(t, await cli('workspace:create', 'x'.repeat(8000)), 1, /^A workspace name may have at most 100 characters\n$/)
  fails(t, await cli('token:create', '--workspace', `wc-${'x'.repeat(98)}`), 1, /at most 100 characters/)
  fails(t, await cli('workspace:create', 'wc-two\nlines'), 1, /may not hold control characters/)
  fails(t, await cli('folder:create', '--workspace', 'wc-acme', 'tab\there'), 1, /A folder name may not hold control characters/)
  t.match(await cli('workspace:create', `wc-${'é'.repeat(97)}`), { code: 0 }, '100 characters, counted as characters')
  t.same(await prisma.workspace.findMany({ where: { name: { startsWith: 'wc-' } }, select: { name: true }, orderBy: { id: 'asc' } }), [{ name: 'wc-acme' }, { name: `wc-${'é'.repeat(97)}` }])
})

t.test('token:create', async (t) => {
  const first = await cli('token:create', '--workspace', 'tc-acme')
  t.match(first, { code: 0, stderr: '' })
  t.match(first.stdout, TOKEN_LINE, 'stdout is only the token')
  const token = first.stdout.trim()
  const workspace = await prisma.workspace.findUniqueOrThrow({ where: { name: 'tc-acme' } })
  const stored = await prisma.apiToken.findMany({ where: { workspaceId: workspace.id } })
  t.match(stored, [{ hash: hashToken(token), prefix: token.slice(0, 11), official: false, label: null, revokedAt: null }])
  t.notMatch(JSON.stringify(stored), token, 'the token itself is not stored')

  const official = await cli('token:create', '--workspace', 'tc-acme', '--official', '--label', 'CI deploy')
  t.match(official.stdout, TOKEN_LINE)
  t.not(official.stdout, first.stdout)
  t.match(
    await prisma.apiToken.findUniqueOrThrow({ where: { hash: hashToken(official.stdout.trim()) } }),
    { workspaceId: workspace.id, official: true, label: 'CI deploy' },
    'the existing workspace is reused',
  )

  fails(t, await cli('token:create'), 2, /missing --workspace <name>/)
  fails(t, await cli('token:create', '--workspace', ' '), 2, /missing --workspace <name>/)
  fails(t, await cli('token:create', '--workspace', 'tc-acme', 'extra'), 2, /unexpected argument "extra"/)
  fails(t, await cli('token:create', '--workspace', 'tc-acme', '--label', 'a\tb'), 2, /^token:create: --label must be one line/)
  fails(t, await cli('token:create', '--workspace', 'tc-acme', '--label', 'l'.repeat(101)), 2, /^token:create: --label must be at most 100 characters/)
  // A blank argument is a usage error (2), as a blank option value is.
  fails(t, await cli('folder:create', '--workspace', 'tc-acme', ''), 2, /missing <folder-name>/)
  t.equal(await prisma.apiToken.count({ where: { workspaceId: workspace.id } }), 2, 'failures store nothing')
  t.equal((await cli('token:create', '--workspace', 'tc-acme', '--label', 'é'.repeat(100))).code, 0, 'a label of 100 characters is fine')
})

t.test('token:revoke', async (t) => {
  const create = async () => (await cli('token:create', '--workspace', 'tr-acme')).stdout.trim()
  const revokedAt = async (token: string) =>
    (await prisma.apiToken.findUniqueOrThrow({ where: { hash: hashToken(token) } })).revokedAt

  const [byToken, byPrefix, untouched] = [await create(), await create(), await create()]
  t.same(await cli('token:revoke', byToken), { code: 0, stdout: `${byToken.slice(0, 11)}\n`, stderr: '' }, 'by the whole token')
  t.type(await revokedAt(byToken), Date)
  t.same(await cli('token:revoke', byPrefix.slice(0, 11)), { code: 0, stdout: `${byPrefix.slice(0, 11)}\n`, stderr: '' }, 'by its prefix')
  t.type(await revokedAt(byPrefix), Date)
  t.equal(await revokedAt(untouched), null, 'other tokens stay live')

  // Revoked already: nothing changes, and it succeeds by either form (a retried revoke is no error).
  const revokedWhen = await revokedAt(byPrefix)
  t.same(await cli('token:revoke', byPrefix.slice(0, 11)), { code: 0, stdout: `${byPrefix.slice(0, 11)}\n`, stderr: '' }, 'again by its prefix')
  t.same(await cli('token:revoke', byPrefix), { code: 0, stdout: `${byPrefix.slice(0, 11)}\n`, stderr: '' }, 'again by the whole token')
  t.same(await revokedAt(byPrefix), revokedWhen, 'revoked when it first was')
  fails(t, await cli('token:revoke', 'sl_00000000'), 1, /No token matches "sl_00000000"/)
  // Longer than the prefix kept and not the whole token: what it says past the prefix cannot be checked.
  fails(t, await cli('token:revoke', untouched.slice(0, 14)), 1, /give the whole token, or its prefix of 11 characters as token:list shows it/)
  t.equal(await revokedAt(untouched), null, 'not revoked on the strength of its first 11 characters')
  fails(t, await cli('token:revoke', 'sl_'), 1, /at least 6 characters/)
  fails(t, await cli('token:revoke'), 2, /token:revoke: missing <token-or-prefix>/)

  const { id: workspaceId } = await prisma.workspace.findUniqueOrThrow({ where: { name: 'tr-acme' } })
  await prisma.apiToken.createMany({
    data: [
      { workspaceId, hash: 'a'.repeat(64), prefix: 'sl_Twin1aaa' },
      { workspaceId, hash: 'b'.repeat(64), prefix: 'sl_Twin1bbb' },
    ],
  })
  fails(t, await cli('token:revoke', 'sl_Twin1'), 1, /"sl_Twin1" matches 2 tokens; give more of it/)
  t.equal(await prisma.apiToken.count({ where: { prefix: { startsWith: 'sl_Twin1' }, revokedAt: { not: null } } }), 0, 'neither revoked')
  t.same(await cli('token:revoke', 'sl_Twin1b'), { code: 0, stdout: 'sl_Twin1bbb\n', stderr: '' }, 'a longer prefix picks one')
})

// Regression: Prisma's startsWith is a LIKE pattern, and "_" (a token character) is its any-one-character
// wildcard, so a mistyped prefix could revoke another token.
t.test('token:revoke takes "_" and "%" in a prefix literally', async (t) => {
  const { id: workspaceId } = await prisma.workspace.create({ data: { name: 'tw-acme' } })
  await prisma.apiToken.create({ data: { workspaceId, hash: 'c'.repeat(64), prefix: 'sl_wcXdefgh' } })
  fails(t, await cli('token:revoke', 'sl_wc_defg'), 1, /No token matches/)
  fails(t, await cli('token:revoke', 'sl_wc%%%'), 1, /No token matches/)
  t.equal((await prisma.apiToken.findUniqueOrThrow({ where: { hash: 'c'.repeat(64) } })).revokedAt, null)
  t.same(await cli('token:revoke', 'sl_wcXdef'), { code: 0, stdout: 'sl_wcXdefgh\n', stderr: '' }, 'the literal prefix still works')
})

t.test('token:list', async (t) => {
  const plain = (await cli('token:create', '--workspace', 'tl-acme')).stdout.trim()
  const official = (await cli('token:create', '--workspace', 'tl-acme', '--official', '--label', 'CI deploy')).stdout.trim()
  await cli('token:revoke', plain)
  await cli('token:create', '--workspace', 'tl-other')

  const [first, second] = await prisma.apiToken.findMany({ where: { workspace: { name: 'tl-acme' } }, orderBy: { id: 'asc' } })
  const listed = await cli('token:list', '--workspace', 'tl-acme')
  t.same(listed, {
    code: 0,
    stdout:
      `${plain.slice(0, 11)}\t-\tstandard\t${first.createdAt.toISOString()}\t${first.revokedAt!.toISOString()}\n` +
      `${official.slice(0, 11)}\tCI deploy\tofficial\t${second.createdAt.toISOString()}\tactive\n`,
    stderr: '',
  })
  t.notMatch(listed.stdout, plain, 'never the token')
  t.notMatch(listed.stdout, official, 'never the token')

  await cli('workspace:create', 'tl-empty')
  t.same(await cli('token:list', '--workspace', 'tl-empty'), { code: 0, stdout: '', stderr: '' }, 'no tokens: no output')
  fails(t, await cli('token:list', '--workspace', 'ghost'), 1, /No workspace named "ghost"/)
  fails(t, await cli('token:list'), 2, /missing --workspace <name>/)
})

t.test('domain:add', async (t) => {
  await cli('workspace:create', 'da-acme')
  await cli('workspace:create', 'da-other')
  const ours = { workspace: { name: 'da-acme' } }
  const domain = (host: string) => prisma.domain.findUnique({ where: { host }, select: { isDefault: true, workspace: { select: { name: true } } } })

  t.same(await cli('domain:add', '--workspace', 'da-acme', 'Go.Acme.Example'), { code: 0, stdout: 'go.acme.example\n', stderr: '' })
  t.same(await domain('go.acme.example'), { isDefault: false, ...ours })

  t.same(await cli('domain:add', '--workspace', 'da-acme', 'bücher.example', '--default'), { code: 0, stdout: 'xn--bcher-kva.example\n', stderr: '' })
  t.same(await domain('xn--bcher-kva.example'), { isDefault: true, ...ours }, 'stored as punycode')
  t.equal(await prisma.domain.count({ where: { host: 'bücher.example' } }), 0)

  await cli('domain:add', '--workspace', 'da-acme', 'go.acme.example', '--default')
  t.same(
    await prisma.domain.findMany({ where: { isDefault: true, ...ours }, select: { host: true } }),
    [{ host: 'go.acme.example' }],
    'one default domain per workspace',
  )

  fails(t, await cli('domain:add', '--workspace', 'da-acme', 'not a host'), 1, /"not a host" is not a valid host name/)
  // Addresses are no domains; other forms of them would be stored as another text ("1.2.3" as 1.2.0.3).
  fails(t, await cli('domain:add', '--workspace', 'da-acme', '127.0.0.1'), 1, /127\.0\.0\.1 is an IP address; a short domain is a host name/)
  for (const address of ['1.2.3', '2130706433', '0x7f.1', '１２７.０.０.１', 'go.acme.42']) {
    fails(t, await cli('domain:add', '--workspace', 'da-acme', address), 1, new RegExp(`"${address.replace(/\./g, '\\.')}" is not a valid host name`))
  }
  fails(t, await cli('domain:add', '--workspace', 'da-acme', 'short.test'), 1, /reserved domains/)
  fails(t, await cli('domain:add', '--workspace', 'da-other', 'go.acme.example'), 1, /belongs to another workspace/)
  fails(t, await cli('domain:add', '--workspace', 'ghost', 'go.ghost.example'), 1, /No workspace named "ghost": create it first with workspace:create ghost/)
  fails(t, await cli('domain:add', '--workspace', 'da-acme'), 2, /domain:add: missing <host>/)
  fails(t, await cli('domain:add', 'go.acme.example'), 2, /missing --workspace <name>/)
  t.equal(await prisma.domain.count({ where: { workspace: { name: { startsWith: 'da-' } } } }), 2, 'failures store nothing')
  t.equal(await prisma.domain.count({ where: { host: { in: ['short.test', 'go.ghost.example'] } } }), 0)
})

t.test('folder:create', async (t) => {
  await cli('workspace:create', 'fc-acme')
  await cli('workspace:create', 'fc-other')

  const created = await cli('folder:create', '--workspace', 'fc-acme', 'Campaigns')
  t.match(created, { code: 0, stdout: /^\d+\n$/, stderr: '' })
  t.same(
    await prisma.folder.findUnique({ where: { id: Number(created.stdout) }, select: { name: true, workspace: { select: { name: true } } } }),
    { name: 'Campaigns', workspace: { name: 'fc-acme' } },
  )

  const duplicate = new RegExp(`already has a folder named "Campaigns" \\(id ${created.stdout.trim()}\\)`)
  fails(t, await cli('folder:create', '--workspace', 'fc-acme', 'Campaigns'), 1, duplicate)
  t.match(await cli('folder:create', '--workspace', 'fc-other', 'Campaigns'), { code: 0, stdout: /^\d+\n$/ }, 'the same name in another workspace')
  fails(t, await cli('folder:create', '--workspace', 'ghost', 'Campaigns'), 1, /No workspace named "ghost"/)
  fails(t, await cli('folder:create', '--workspace', 'fc-acme'), 2, /folder:create: missing <folder-name>/)
  fails(t, await cli('folder:create', '--workspace', 'fc-acme', 'x'.repeat(101)), 1, /A folder name may have at most 100 characters/)
  t.equal(await prisma.folder.count({ where: { workspace: { name: { startsWith: 'fc-' } } } }), 2, 'failures store nothing')
})

t.test('script:create', async (t) => {
  await cli('workspace:create', 'sc-acme')
  const snippet = '<script>console.log("héllo")</script>\n'
  const dir = t.testdir({
    'pixel.html': snippet,
    'max.js': 'x'.repeat(64 * 1024),
    'big.js': 'x'.repeat(64 * 1024 + 1),
    'latin1.js': Buffer.from([0x63, 0x61, 0x66, 0xe9]),
    'empty.js': '',
    folder: {},
  })
  const create = (file: string, workspace = 'sc-acme') =>
    cli('script:create', '--workspace', workspace, '--name', 'Pixel', '--file', join(dir, file))

  const created = await create('pixel.html')
  t.match(created, { code: 0, stdout: /^\d+\n$/, stderr: '' })
  t.match(await prisma.script.findUniqueOrThrow({ where: { id: Number(created.stdout) } }), { name: 'Pixel', content: snippet })
  t.match(await create('max.js'), { code: 0, stdout: /^\d+\n$/ }, 'exactly 64 KiB is accepted')

  fails(t, await create('big.js'), 1, /has 65537 bytes; a script may hold at most 64 KiB/)
  fails(t, await create('missing.js'), 1, /Cannot read the script file: ENOENT/)
  fails(t, await create('folder'), 1, /is not a file/)
  fails(t, await create('latin1.js'), 1, /is not UTF-8 text/)
  fails(t, await create('empty.js'), 1, /is empty/)
  fails(t, await create('pixel.html', 'ghost'), 1, /No workspace named "ghost"/)
  fails(t, await cli('script:create', '--workspace', 'sc-acme', '--name', 'Pixel'), 2, /missing --file <path>/)
  fails(t, await cli('script:create', '--workspace', 'sc-acme', '--file', join(dir, 'pixel.html')), 2, /missing --name <text>/)
  t.equal(await prisma.script.count({ where: { workspace: { name: 'sc-acme' } } }), 2, 'failures store nothing')
})

t.test('limits:set', async (t) => {
  await cli('workspace:create', 'ls-acme')
  const limits = async () => prisma.workspace.findUniqueOrThrow({ where: { name: 'ls-acme' }, select: { hourLimit: true, dayLimit: true } })
  const set = (...argv: string[]) => cli('limits:set', '--workspace', 'ls-acme', ...argv)

  t.same(await set('--hour', '50'), { code: 0, stdout: 'hour=50 day=10000\n', stderr: '' }, 'unset day: the default')
  t.same(await limits(), { hourLimit: 50, dayLimit: null })
  t.same(await set('--day', '500'), { code: 0, stdout: 'hour=50 day=500\n', stderr: '' }, 'hour kept')
  t.same(await set('--hour=0', '--day', '2147483647'), { code: 0, stdout: 'hour=0 day=2147483647\n', stderr: '' })
  t.same(await limits(), { hourLimit: 0, dayLimit: 2147483647 })

  for (const bad of ['abc', '1.5', '-5', '1e3', '', '2147483648']) {
    fails(t, await set(`--hour=${bad}`), 2, /--hour must be a whole number from 0 to 2147483647/)
  }
  fails(t, await set('--hour', '-5'), 2, /'--hour' argument is ambiguous/)
  fails(t, await set(), 2, /^limits:set: give --hour N, --day N or both \(usage: limits:set /)
  fails(t, await cli('limits:set', '--hour', '5'), 2, /missing --workspace <name>/)
  fails(t, await cli('limits:set', '--workspace', 'ghost', '--day', '5'), 1, /No workspace named "ghost"/)
  t.same(await limits(), { hourLimit: 0, dayLimit: 2147483647 }, 'failures change nothing')
})
