/**
 * Contract section 12, SSRF: autofill never connects to a loopback address, however the address is
 * written, reached through a host name, or reached through a redirect; it refuses before connecting.
 *
 * The real production policy is tested: no AUTOFILL_ALLOW_PRIVATE, and the test suite's loopback-only
 * safety net (`restrictAddress`) lifted. Every target is nevertheless a loopback page server of this test
 * (127.0.0.1, and ::1 and 127.0.0.2 when they can be bound) that logs every TCP connection and request
 * it gets, and every host name goes through the injected resolver: nothing leaves this machine even if
 * the guard were broken.
 *
 * 1. Through the API: a create whose URL points at loopback answers 201 with `X-Autofill: failed`, the
 *    link stored as given, quickly, and no page server saw anything.
 * 2. The guarded dispatcher directly, with a policy that allows 127.0.0.1 only (standing for a public
 *    address): a redirect to a refused address, and host names resolving to refused addresses.
 */
import type { AddressInfo } from 'node:net'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { setTimeout as delay } from 'node:timers/promises'
import t from 'tap'
import { Agent, fetch } from 'undici'
import type { LinkMetadata } from '../../src/autofill/autofill.js'
import type { AddressPolicy } from '../../src/autofill/address-policy.js'
import { createGuardedAgent } from '../../src/autofill/guarded-agent.js'
import { fetchPage } from '../../src/autofill/page-fetch.js'
import { buildTestApp, client, createWorkspaceToken, testLookup } from '../support/test-app.js'

const PAGE = `<!doctype html><html><head>
<title>Loopback page</title>
<meta property="og:title" content="Internal title">
<meta property="og:description" content="Internal description">
<meta property="og:image" content="/internal.png">
<link rel="icon" href="/internal.ico">
</head><body>internal</body></html>`

/** What every page server saw, in order: `<address> connection` and `<address> <METHOD> <path>`. */
const traffic: string[] = []
t.beforeEach(() => {
  traffic.length = 0
})

/** The page, or a 302 to the address in `?to=`. */
function respond(request: IncomingMessage, response: ServerResponse) {
  const target = new URL(request.url ?? '/', 'http://page.invalid').searchParams.get('to')
  if (target) response.writeHead(302, { location: target }).end()
  else response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE)
}

interface PageServer {
  port: number
  url(path: string): string
}

/** A page server on `address` that logs into `traffic`; undefined when `address` cannot be bound. */
async function startPageServer(address: string, port = 0): Promise<PageServer | undefined> {
  const server = createServer((request, response) => {
    traffic.push(`${address} ${request.method} ${request.url?.split('?')[0]}`)
    respond(request, response)
  })
  server.on('connection', () => traffic.push(`${address} connection`))
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, address, resolve)
    })
  } catch {
    return undefined
  }
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise((resolve) => server.close(resolve))
  })
  const bound = (server.address() as AddressInfo).port
  const host = address.includes(':') ? `[${address}]` : address
  return { port: bound, url: (path) => `http://${host}:${bound}${path}` }
}

/** Lets a connection that was accepted but not yet reported show up in `traffic`. */
const settle = () => delay(50)

const loopback = await startPageServer('127.0.0.1')
if (!loopback) throw new Error('cannot listen on 127.0.0.1')
const { port } = loopback
// On the same port, so that any address a host name resolves to lands on a page server.
const loopback6 = await startPageServer('::1', port)
const loopback2 = await startPageServer('127.0.0.2', port)

// ---------------------------------------------------------------------------------------------------
// 1. Through the API, with the production policy.

const appLookup = testLookup({ 'loopback.example': ['127.0.0.1'], 'dual-stack.example': ['::1', '127.0.0.1'] })
const { app, prisma } = await buildTestApp(t, { autofill: { lookup: appLookup, restrictAddress: undefined } })
const api = client(app, await createWorkspaceToken(prisma, { workspace: 'ssrf', defaultDomain: 'go.ssrf.test' }))

// The first request of an app pays for its warm-up (database connections, lazy loading): not timed below.
await api.create({ url: 'https://warm-up.example/' }, { autofill: false })

/** The control: the same resolver without any guard, showing where a URL would land. */
const unguarded = new Agent({ connect: { lookup: appLookup } as Agent.Options['connect'] })
t.teardown(() => unguarded.destroy())

const EMPTY: LinkMetadata = { title: null, description: null, image: null, favicon: null }

// Each case has a path of its own: autofill caches per address, and several spellings below are the
// same address once parsed (0x7f.1, 2130706433 and 0177.0.0.1 are all 127.0.0.1). The cases marked
// `needsIPv6` are skipped where ::1 cannot be bound (IPv6 sockets unavailable).
const cases: [name: string, url: (path: string) => string, needsIPv6?: boolean][] = [
  ['IPv4 loopback', (path) => `http://127.0.0.1:${port}${path}`],
  ['IPv6 loopback', (path) => `http://[::1]:${port}${path}`, true],
  ['hexadecimal IPv4', (path) => `http://0x7f.1:${port}${path}`],
  ['IPv4 as one number', (path) => `http://2130706433:${port}${path}`],
  ['octal IPv4', (path) => `http://0177.0.0.1:${port}${path}`],
  ['IPv4-mapped IPv6', (path) => `http://[::ffff:127.0.0.1]:${port}${path}`, true],
  ['localhost', (path) => `http://localhost:${port}${path}`],
  ['a name resolving to loopback', (path) => `http://loopback.example:${port}${path}`],
  ['a name resolving to IPv6 and IPv4 loopback', (path) => `http://dual-stack.example:${port}${path}`, true],
]

cases.forEach(([name, url, needsIPv6], index) => {
  const address = url(`/p/${index}`)
  t.test(`${name}: ${address}`, { skip: needsIPv6 && !loopback6 ? '::1 cannot be bound here' : false }, async (t) => {
    const control = await fetch(address, { dispatcher: unguarded })
    await control.text()
    t.ok(traffic.some((event) => event.endsWith(` GET /p/${index}`)), 'without the guard, this URL reaches a page server')
    traffic.length = 0

    const started = performance.now()
    const response = await api.create({ url: address })
    const elapsed = performance.now() - started
    t.equal(response.statusCode, 201, response.body)
    t.equal(response.headers['x-autofill'], 'failed')
    t.ok(elapsed < 2000, `answered in ${Math.round(elapsed)} ms, well under AUTOFILL_TIMEOUT_MS`)
    const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: response.json().uniq } })
    t.match(stored, { url: address, ...EMPTY }, 'stored as given')
    // The outcome of that create's fetch (cached per address): refused by the policy, not a network error.
    t.match(await app.autofill.fill(address, EMPTY), { status: 'failed', reason: /refused to connect to .*: loopback address/ })
    await settle()
    t.same(traffic, [], 'no connection, no request')
  })
})

// ---------------------------------------------------------------------------------------------------
// 2. The guarded dispatcher, with 127.0.0.1 standing for a public address and 127.0.0.2 refused.

t.test('the guarded dispatcher', { skip: loopback2 ? false : '127.0.0.2 cannot be bound here' }, async (t) => {
  const lookup = testLookup({ 'mixed.example': ['127.0.0.2', '127.0.0.1'], 'refused.example': ['127.0.0.2'] })
  /** fetchPage through a guarded dispatcher under `allowAddress`, closed when the test ends. */
  function guardedFetch(allowAddress: AddressPolicy) {
    const dispatcher = createGuardedAgent({ allowAddress, lookup, connectTimeoutMs: 1000 })
    t.teardown(() => dispatcher.destroy())
    return (url: string) => fetchPage(url, { dispatcher, timeoutMs: 1000, maxBytes: 65536, userAgent: 'test' })
  }
  const fetchAllowing127001 = guardedFetch((address) => address === '127.0.0.1')
  const refused = (pattern: RegExp) => ({ name: 'PageFetchError', message: pattern })
  const pageAt = (url: string) => ({ url: new URL(url), html: /Internal title/ })

  t.test('an allowed address is fetched (the control)', async (t) => {
    const url = loopback.url('/page')
    t.match(await fetchAllowing127001(url), pageAt(url))
    t.same(traffic, ['127.0.0.1 connection', '127.0.0.1 GET /page'])
  })

  t.test('a redirect to a refused address is not followed', async (t) => {
    for (const target of [`http://127.0.0.2:${port}/page`, `http://refused.example:${port}/page`]) {
      traffic.length = 0
      const start = loopback.url(`/hop?to=${encodeURIComponent(target)}`)
      await t.rejects(fetchAllowing127001(start), refused(/refused to connect to .*127\.0\.0\.2\b.*: loopback address/), target)
      await settle()
      t.same(traffic, ['127.0.0.1 connection', '127.0.0.1 GET /hop'], `hop 1 only, nothing reached ${target}`)
    }
  })

  t.test('a name resolving to a refused address, then an allowed one, connects to the allowed one only', async (t) => {
    const url = `http://mixed.example:${port}/page`
    t.match(await fetchAllowing127001(url), pageAt(url))
    await settle()
    t.same(traffic, ['127.0.0.1 connection', '127.0.0.1 GET /page'])
  })

  t.test('a name resolving to refused addresses only is refused, before connecting', async (t) => {
    const url = `http://refused.example:${port}/page`
    await t.rejects(fetchAllowing127001(url), refused(/refused to connect to refused\.example \(127\.0\.0\.2\): loopback address/))
    await settle()
    t.same(traffic, [])
  })

  t.test('a socket whose remote address is refused is closed before any request', async (t) => {
    // Allows 127.0.0.1 when first asked (the check of the literal host), then no more: the check of the
    // connected socket's remote address is the one that refuses.
    const asked: string[] = []
    const fetchOnce = guardedFetch((address) => asked.push(address) === 1 && address === '127.0.0.1')
    await t.rejects(fetchOnce(loopback.url('/page')), refused(/refused to connect to 127\.0\.0\.1: loopback address/))
    t.same(asked, ['127.0.0.1', '127.0.0.1'], 'the host, then the socket')
    await settle()
    t.same(traffic, ['127.0.0.1 connection'], 'connected, but nothing sent')
  })
})
