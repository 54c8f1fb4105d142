/**
 * Contract section 12 (autofill) against real pages served on loopback by test/autofill/page-server.ts.
 * Every case checks the status, X-Autofill, the four fields answered and the four fields stored.
 *
 * - which tags fill which field: open graph, twitter, plain <title>/<meta description>, icon links, and
 *   their precedence; image and favicon made absolute; /favicon.ico when the page names no icon
 * - relative addresses resolved against the final page address (after a redirect too); javascript: and
 *   data: images dropped
 * - charsets (Content-Type header, <meta charset>, http-equiv), entities, white space, control characters,
 *   titles and descriptions cut to 512 / 2048 code points
 * - redirects: a 3-hop chain, exactly 5 (allowed), a loop and a longer chain (6 requests, then failed)
 * - bounds: a 10 MB page read only up to </head>, a head larger than AUTOFILL_MAX_BYTES, a page that never
 *   ends (AUTOFILL_TIMEOUT_MS)
 * - non-HTML answers, 404, 500, an empty page
 * - when nothing is fetched (autofill false, nothing empty); client values never overwritten; "" is empty
 * - the per-page cache (successes and failures) and one fetch for concurrent creates
 * - autofill on update, after the merge of section 7
 * - the User-Agent sent, and the log line of a failure (without the query string)
 */
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { until } from '../support/polling.js'
import type { AutofillStatus } from '../../src/autofill/autofill.js'
import { buildTestApp, client, createWorkspaceToken } from '../support/test-app.js'
import { delayed, hanging, page, redirect, startPageServer, status, streamedPage } from './page-server.js'

const TIMEOUT_MS = 800
const MAX_BYTES = 64 * 1024

const logLines: Record<string, any>[] = []
const { app, prisma } = await buildTestApp(t, {
  env: { AUTOFILL_ALLOW_PRIVATE: 'true', AUTOFILL_TIMEOUT_MS: String(TIMEOUT_MS), AUTOFILL_MAX_BYTES: String(MAX_BYTES) },
  logger: { level: 'info', stream: { write: (line: string) => void logLines.push(JSON.parse(line)) } },
})
const token = await createWorkspaceToken(prisma, { workspace: 'autofill', defaultDomain: 'go.autofill.test' })
const api = client(app, token)
const server = await startPageServer(t)
const origin = server.origin

// ---- pages ----

const html = (head: string, body = '<p>The article.</p>') => `<!doctype html><html><head>${head}</head><body>${body}</body></html>`
const og = (property: string, content: string) => `<meta property="og:${property}" content="${content}">`
const twitter = (name: string, content: string) => `<meta name="twitter:${name}" content="${content}">`
const title = (text: string) => `<title>${text}</title>`
const description = (text: string) => `<meta name="description" content="${text}">`

/** Serves an HTML page (UTF-8) at `path`. */
const serve = (path: string, head: string, body?: string) => server.route(path, page(html(head, body)))

/** Page bytes from ASCII markup and raw byte sequences, in order. */
const bytes = (...parts: (string | number[])[]) =>
  Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'ascii') : Buffer.from(part))))

// ---- links ----

type Fields = Record<'title' | 'description' | 'image' | 'favicon', string | null>
const NONE: Fields = { title: null, description: null, image: null, favicon: null }
const fieldsOf = ({ title, description, image, favicon }: Fields): Fields => ({ title, description, image, favicon })

const create = (path: string, link: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
  api.create({ url: server.url(path), ...link }, extra)

/** A link to `path` created without autofill (nothing fetched); answers its record. */
async function bareLink(path: string, link: Record<string, unknown> = {}) {
  const response = await create(path, link, { autofill: false })
  if (response.statusCode !== 201) throw new Error(`create answered ${response.statusCode}: ${response.body}`)
  return response.json()
}

/**
 * Asserts the answer (status code, X-Autofill, the four fields; those not in `fields` are null) and that
 * the stored link holds the same four fields. Answers the record and the stored row.
 */
async function expectLink(t: Test, response: LightMyRequestResponse, autofill: AutofillStatus, fields: Partial<Fields>, code = 201) {
  t.equal(response.statusCode, code, 'status code')
  t.equal(response.headers['x-autofill'], autofill, 'X-Autofill')
  const record = response.json()
  const expected = { ...NONE, ...fields }
  t.strictSame(fieldsOf(record), expected, 'fields answered')
  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: record.uniq } })
  t.strictSame(fieldsOf(stored), expected, 'fields stored')
  return { record, stored }
}

const fetches = (path: string) => server.requests(path).length

// ---- which tags fill which field ----

t.test('open graph tags and an icon link fill every field, with absolute addresses', async (t) => {
  serve('/full/article', [
    title('The plain title'),
    og('title', 'Full OG title'),
    og('description', 'Full OG description'),
    og('image', '/images/full.png'),
    '<link rel="icon" href="/static/icon.png">',
  ].join(''))
  const response = await create('/full/article')
  const { stored } = await expectLink(t, response, 'filled', {
    title: 'Full OG title',
    description: 'Full OG description',
    image: `${origin}/images/full.png`,
    favicon: `${origin}/static/icon.png`,
  })
  t.equal(stored.url, server.url('/full/article'))
  t.equal(fetches('/full/article'), 1)
})

t.test('twitter tags alone fill every field', async (t) => {
  serve('/twitter/only', [
    twitter('title', 'Twitter title'),
    twitter('description', 'Twitter description'),
    twitter('image', 'https://images.example/tw.png'),
  ].join(''))
  await expectLink(t, await create('/twitter/only'), 'filled', {
    title: 'Twitter title',
    description: 'Twitter description',
    image: 'https://images.example/tw.png',
    favicon: `${origin}/favicon.ico`,
  })
})

t.test('precedence: open graph, then twitter, then plain HTML', async (t) => {
  serve('/precedence/all', [
    title('Plain title'),
    description('Plain description'),
    twitter('title', 'Twitter title'),
    twitter('description', 'Twitter description'),
    twitter('image', '/twitter.png'),
    og('title', 'OG title'),
    og('description', 'OG description'),
    og('image', '/og.png'),
  ].join(''))
  await expectLink(t, await create('/precedence/all'), 'filled', {
    title: 'OG title',
    description: 'OG description',
    image: `${origin}/og.png`,
    favicon: `${origin}/favicon.ico`,
  })

  serve('/precedence/no-og', [
    title('Plain title'),
    description('Plain description'),
    twitter('title', 'Twitter title'),
    twitter('description', 'Twitter description'),
  ].join(''))
  await expectLink(t, await create('/precedence/no-og'), 'partial', {
    title: 'Twitter title',
    description: 'Twitter description',
    favicon: `${origin}/favicon.ico`,
  })
})

t.test('<title> and meta description alone: partial, no image, the site favicon', async (t) => {
  serve('/plain/dir/page', title('Plain page') + description('A plain description'))
  await expectLink(t, await create('/plain/dir/page'), 'partial', {
    title: 'Plain page',
    description: 'A plain description',
    favicon: `${origin}/favicon.ico`,
  })
})

// ---- addresses ----

t.test('relative addresses resolve against the page address', async (t) => {
  serve('/rel/dir/page', title('Relative') + og('image', '../img/a.png') + '<link rel="icon" href="icon.png">')
  await expectLink(t, await create('/rel/dir/page'), 'partial', {
    title: 'Relative',
    image: `${origin}/rel/img/a.png`,
    favicon: `${origin}/rel/dir/icon.png`,
  })
})

t.test('an icon link that cannot be used: the next one the page names, not /favicon.ico', async (t) => {
  serve('/icons/page', title('Icons') + '<link rel="icon" href="data:image/svg+xml,%3Csvg%3E%3C/svg%3E"><link rel="icon" href="">' +
    '<link rel="icon" type="image/png" href="/favicon-32.png">')
  await expectLink(t, await create('/icons/page'), 'partial', { title: 'Icons', favicon: `${origin}/favicon-32.png` })
})

t.test('an og:title and description longer than autofill keeps (8 KiB): cut to the fields\' lengths', async (t) => {
  serve('/huge/page', og('title', 'T'.repeat(30_000)) + og('description', 'd '.repeat(10_000)))
  const response = await create('/huge/page')
  t.equal(response.statusCode, 201)
  t.equal(response.json().title, 'T'.repeat(512))
  t.equal(response.json().description.length, 2047, 'cut at 2,048 characters, the trailing space dropped')
})

t.test('after a redirect, relative addresses resolve against the redirect target', async (t) => {
  const other = await startPageServer(t)
  server.route('/moving/x/start', redirect(other.url('/moved/dir/page')))
  other.route('/moved/dir/page', page(html(title('Moved') + og('image', '../img/b.png'))))
  await expectLink(t, await create('/moving/x/start'), 'partial', {
    title: 'Moved',
    image: `${other.origin}/moved/img/b.png`,
    favicon: `${other.origin}/favicon.ico`,
  })
  t.equal(fetches('/moving/x/start'), 1)
  t.equal(other.requests('/moved/dir/page').length, 1)
})

t.test('javascript: and data: images are not kept', async (t) => {
  const unsafe = { js: 'javascript:alert(1)', data: 'data:image/png;base64,iVBORw0KGgo=' }
  for (const [name, address] of Object.entries(unsafe)) {
    serve(`/unsafe/${name}`, title(`Unsafe ${name}`) + og('image', address))
    await expectLink(t, await create(`/unsafe/${name}`), 'partial', { title: `Unsafe ${name}`, favicon: `${origin}/favicon.ico` })
  }
  serve('/unsafe/fallback', title('Unsafe then safe') + og('image', unsafe.js) + twitter('image', '/safe.png'))
  await expectLink(t, await create('/unsafe/fallback'), 'partial', {
    title: 'Unsafe then safe',
    image: `${origin}/safe.png`,
    favicon: `${origin}/favicon.ico`,
  })
})

// ---- text ----

t.test('charsets: header, <meta charset>, http-equiv', async (t) => {
  const cases: { path: string; contentType: string; declaration?: string; titleBytes: Uint8Array; expected: string }[] = [
    {
      path: '/charset/utf-8',
      contentType: 'text/html; charset=utf-8',
      titleBytes: new TextEncoder().encode('Grüße aus 東京 — ok'),
      expected: 'Grüße aus 東京 — ok',
    },
    {
      path: '/charset/iso-8859-1',
      contentType: 'text/html; charset=ISO-8859-1',
      titleBytes: bytes('Caf', [0xe9], ' cr', [0xe8], 'me'),
      expected: 'Café crème',
    },
    {
      // 0x80 to 0x9f are the letters windows-1252 adds to ISO-8859-1 (€, Ÿ, “”): Node 20's own decoder read them as C1 controls.
      path: '/charset/windows-1252',
      contentType: 'text/html',
      declaration: '<meta charset="windows-1252">',
      titleBytes: bytes('Caf', [0xe9], ' ', [0x80], ' ', [0x93], 'ok', [0x94], ' ', [0x9f]),
      expected: 'Café € “ok” Ÿ',
    },
    {
      path: '/charset/latin1-label',
      contentType: 'text/html; charset=latin1',
      titleBytes: bytes([0x80], '5'),
      expected: '€5',
    },
    {
      path: '/charset/windows-1251',
      contentType: 'text/html',
      declaration: '<meta charset="windows-1251">',
      titleBytes: bytes([0xcf, 0xf0, 0xe8, 0xe2, 0xe5, 0xf2]),
      expected: 'Привет',
    },
    {
      path: '/charset/shift_jis',
      contentType: 'text/html',
      declaration: '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">',
      titleBytes: bytes([0x93, 0xfa, 0x96, 0x7b]),
      expected: '日本',
    },
  ]
  for (const { path, contentType, declaration = '', titleBytes, expected } of cases) {
    const body = bytes(`<!doctype html><html><head>${declaration}<title>`, [...titleBytes], '</title></head><body></body></html>')
    server.route(path, page(body, contentType))
    await t.test(path, async (t) => {
      await expectLink(t, await create(path), 'partial', { title: expected, favicon: `${origin}/favicon.ico` })
    })
  }
})

t.test('an unknown charset label in the header leaves the <meta> declaration in charge', async (t) => {
  const body = bytes('<!doctype html><html><head><meta charset="windows-1251"><title>', [0xcf, 0xf0, 0xe8, 0xe2, 0xe5, 0xf2], '</title></head></html>')
  server.route('/charset/unknown-label', page(body, 'text/html; charset=no-such-charset'))
  const response = await create('/charset/unknown-label')
  t.equal(response.statusCode, 201)
  t.equal(response.headers['x-autofill'], 'partial')
  t.equal(response.json().title, 'Привет', 'decoded as the <meta> says')
})

t.test('entities are decoded; white space is collapsed and trimmed', async (t) => {
  serve('/text/entities', title('Tom &amp; Jerry &#233;t&#xE9; &quot;quoted&quot;') + og('description', 'Fish &amp; chips &lt;3'))
  await expectLink(t, await create('/text/entities'), 'partial', {
    title: 'Tom & Jerry été "quoted"',
    description: 'Fish & chips <3',
    favicon: `${origin}/favicon.ico`,
  })
  serve('/text/whitespace', title('\n   Hello\n\t  wide \r\n  world   \n') + description('  one\n\ntwo  '))
  await expectLink(t, await create('/text/whitespace'), 'partial', {
    title: 'Hello wide world',
    description: 'one two',
    favicon: `${origin}/favicon.ico`,
  })
})

t.test('an image or icon address broken over lines is read as a browser reads it: tabs and newlines dropped', async (t) => {
  serve('/text/broken-address', title('Broken address') + og('image', ' /very\nlong\t.png ') + '<link rel="icon" href="/ic\non.png">')
  await expectLink(t, await create('/text/broken-address'), 'partial', {
    title: 'Broken address',
    image: `${origin}/verylong.png`,
    favicon: `${origin}/icon.png`,
  })
})

t.test('control characters in a title do not break the create and are not stored', async (t) => {
  serve('/text/control', title('Bell\u0007and\u001bescape\u0085next'))
  await expectLink(t, await create('/text/control'), 'partial', { title: 'Bell and escape next', favicon: `${origin}/favicon.ico` })

  serve('/text/nul', title('NUL\u0000inside') + og('description', 'attr\u0000nul'))
  const response = await create('/text/nul')
  t.equal(response.statusCode, 201)
  t.equal(response.headers['x-autofill'], 'partial')
  const stored = await prisma.link.findUniqueOrThrow({ where: { uniq: response.json().uniq } })
  t.notMatch(stored.title, /\u0000/, 'no NUL in the stored title')
  t.notMatch(stored.description, /\u0000/, 'no NUL in the stored description')
  t.equal(stored.title, 'NUL inside', 'the NUL is dropped like other control characters')
  t.equal(stored.description, 'attr nul', 'the NUL is dropped like other control characters')
})

t.test('a title over 512 and a description over 2048 code points are cut to exactly that', async (t) => {
  // Astral characters (two UTF-16 units each) make code points and string length differ.
  const longTitle = 'ab😀é'.repeat(200)
  const longDescription = 'xy😀'.repeat(1000)
  const cut = (text: string, limit: number) => Array.from(text).slice(0, limit).join('')
  serve('/limits/long', title(longTitle) + og('description', longDescription))
  const { stored } = await expectLink(t, await create('/limits/long'), 'partial', {
    title: cut(longTitle, 512),
    description: cut(longDescription, 2048),
    favicon: `${origin}/favicon.ico`,
  })
  t.equal(Array.from(stored.title ?? '').length, 512)
  t.equal(Array.from(stored.description ?? '').length, 2048)
})

// ---- redirects ----

/** Serves a chain `${prefix}/0` → … → `${prefix}/${hops - 1}` → `${prefix}/final`, with a page at the end. */
function serveChain(prefix: string, hops: number, head: string) {
  for (let hop = 0; hop < hops; hop++) {
    const next = hop + 1 < hops ? String(hop + 1) : 'final'
    // Absolute, root-relative and path-relative Location headers, in turn.
    const location = [server.url(`${prefix}/${next}`), `${prefix}/${next}`, next][hop % 3]
    server.route(`${prefix}/${hop}`, redirect(location, [301, 302, 307, 308][hop % 4]))
  }
  serve(`${prefix}/final`, head)
}

const chainHops = (prefix: string, hops: number) => Array.from({ length: hops }, (_, hop) => fetches(`${prefix}/${hop}`))

t.test('a chain of 3 redirects fills from the last page', async (t) => {
  serveChain('/chain3', 3, og('title', 'End of chain') + og('description', 'Reached') + og('image', 'pic.png'))
  await expectLink(t, await create('/chain3/0'), 'filled', {
    title: 'End of chain',
    description: 'Reached',
    image: `${origin}/chain3/pic.png`,
    favicon: `${origin}/favicon.ico`,
  })
  t.strictSame(chainHops('/chain3', 3), [1, 1, 1], 'each hop fetched once')
  t.equal(fetches('/chain3/final'), 1)
})

t.test('exactly 5 redirects are followed', async (t) => {
  serveChain('/chain5', 5, title('Five hops'))
  await expectLink(t, await create('/chain5/0'), 'partial', { title: 'Five hops', favicon: `${origin}/favicon.ico` })
  t.equal(fetches('/chain5/final'), 1)
})

t.test('a redirect loop fails after 1 + 5 requests; the link is stored as given', async (t) => {
  server.route('/loop/a', redirect('/loop/b'))
  server.route('/loop/b', redirect('/loop/a'))
  const { stored } = await expectLink(t, await create('/loop/a', { title: 'Given title' }), 'failed', { title: 'Given title' })
  t.equal(stored.url, server.url('/loop/a'))
  t.equal(fetches('/loop/a') + fetches('/loop/b'), 6)
})

t.test('a chain of more than 5 redirects fails after 6 requests', async (t) => {
  serveChain('/chain7', 7, title('Too far'))
  await expectLink(t, await create('/chain7/0'), 'failed', {})
  t.strictSame(chainHops('/chain7', 7), [1, 1, 1, 1, 1, 1, 0], 'the 7th hop is never requested')
  t.equal(fetches('/chain7/final'), 0)
})

// ---- bounds ----

const TEN_MB = 10 * 1024 * 1024

/** Waits until the streamed page finished or was closed (at most 5 s). */
const settled = (stats: { settled: Promise<void> }) => Promise.race([stats.settled, sleep(5000)])

t.test('a 10 MB page is read up to </head> only', async (t) => {
  const head = og('title', 'Big page') + og('description', 'Big description') + og('image', '/big.png') + '<link rel="icon" href="/big.ico">'
  // A meta after </head> would win (the parser keeps the last og:title) if reading went past the head.
  const { handler, stats } = streamedPage(`<!doctype html><html><head>${head}</head><body>${og('title', 'From the body')}`, TEN_MB)
  server.route('/large/head-first', handler)
  await expectLink(t, await create('/large/head-first'), 'filled', {
    title: 'Big page',
    description: 'Big description',
    image: `${origin}/big.png`,
    favicon: `${origin}/big.ico`,
  })
  await settled(stats)
  t.ok(stats.closedEarly, 'the client closed the connection before the end of the page')
  // What was written includes what the kernel buffers took (a few MB on loopback): only "not all" is certain.
  t.ok(stats.written < TEN_MB, `the server wrote ${stats.written} of ${TEN_MB} bytes`)
})

t.test(`a 10 MB page whose head does not end in the first AUTOFILL_MAX_BYTES fails`, async (t) => {
  const { handler, stats } = streamedPage(`<!doctype html><html><head>${title('Endless head')}`, TEN_MB, '<meta name="filler" content="x">\n')
  server.route('/large/no-head', handler)
  await expectLink(t, await create('/large/no-head'), 'failed', {})
  await settled(stats)
  t.ok(stats.closedEarly, 'the client closed the connection before the end of the page')
  // What was written includes what the kernel buffers took (a few MB on loopback): only "not all" is certain.
  t.ok(stats.written < TEN_MB, `the server wrote ${stats.written} of ${TEN_MB} bytes`)
})

t.test('a 10 MB page without </head> (optional in HTML) is read up to where its body begins', async (t) => {
  const { handler, stats } = streamedPage(`<!doctype html><html><head>${title('Minified')}${og('description', 'No end tag')}<body>`, TEN_MB)
  server.route('/large/implied-head-end', handler)
  await expectLink(t, await create('/large/implied-head-end'), 'partial', {
    title: 'Minified',
    description: 'No end tag',
    favicon: `${origin}/favicon.ico`,
  })
  await settled(stats)
  t.ok(stats.closedEarly, 'the client closed the connection before the end of the page')
})

t.test('"</head>" and "charset=" that are not markup: in a comment, a script, an attribute value', async (t) => {
  serve('/not-markup/comment', `<!-- see </header> and </head> --><meta charset="utf-8">${title('After the comment')}${description('Still the head')}`)
  await expectLink(t, await create('/not-markup/comment'), 'partial', {
    title: 'After the comment', description: 'Still the head', favicon: `${origin}/favicon.ico`,
  })
  serve('/not-markup/script', `<script>var s = "</head><body>"</script>${title('After the script')}${description('Still the head')}`)
  await expectLink(t, await create('/not-markup/script'), 'partial', {
    title: 'After the script', description: 'Still the head', favicon: `${origin}/favicon.ico`,
  })
  // UTF-8 without a charset in the header: a description that mentions another charset does not declare it.
  server.route('/not-markup/charset', page(Buffer.from(html(
    `${description('Pages in charset=koi8-r are supported')}<meta charset="utf-8">${title('Café naïve')}`,
  ), 'utf8'), 'text/html'))
  await expectLink(t, await create('/not-markup/charset'), 'partial', {
    title: 'Café naïve', description: 'Pages in charset=koi8-r are supported', favicon: `${origin}/favicon.ico`,
  })
})

t.test('tracking snippets before the open-graph tags (<noscript><img>, <noscript><iframe>) do not end the head', async (t) => {
  serve('/snippets', '<noscript><img height="1" width="1" src="https://www.facebook.com/tr?id=1"></noscript>' +
    '<noscript><iframe src="https://www.googletagmanager.com/ns.html?id=GTM-X"></iframe></noscript>' +
    `${title('Shop')}${og('title', 'OG Title')}${og('description', 'OG Description')}${og('image', '/og.png')}<link rel="icon" href="/fav.png">`)
  await expectLink(t, await create('/snippets'), 'filled', {
    title: 'OG Title', description: 'OG Description', image: `${origin}/og.png`, favicon: `${origin}/fav.png`,
  })
})

t.test('a head of a thousand tags autofill does not read, around the ones it does', async (t) => {
  const noise = '<meta name="keywords" content="one, two, three">'.repeat(400)
  serve('/many-tags', `${noise}${og('title', 'Among many')}${noise}${og('description', 'Found')}${noise}`)
  await expectLink(t, await create('/many-tags'), 'partial', { title: 'Among many', description: 'Found', favicon: `${origin}/favicon.ico` })
})

t.test('a page that never ends fails within AUTOFILL_TIMEOUT_MS', async (t) => {
  server.route('/hanging', hanging())
  const start = performance.now()
  const response = await create('/hanging')
  const elapsed = performance.now() - start
  await expectLink(t, response, 'failed', {})
  t.ok(elapsed >= TIMEOUT_MS - 50, `waited for the time budget (${Math.round(elapsed)} ms)`)
  t.ok(elapsed < TIMEOUT_MS + 1500, `answered in ${Math.round(elapsed)} ms`)
})

// ---- what is not a usable page ----

t.test('non-HTML answers and error statuses fail; the link is stored as given', async (t) => {
  const png = bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  const answers = {
    '/bad/json': status(200, JSON.stringify({ title: 'not a page' }), 'application/json'),
    '/bad/png': status(200, png, 'image/png'),
    '/bad/500': status(500, html(og('title', 'Server error page'))),
    '/bad/404': status(404, html(og('title', 'Not found page'))),
  }
  for (const [path, handler] of Object.entries(answers)) {
    server.route(path, handler)
    await t.test(path, async (t) => {
      const { stored } = await expectLink(t, await create(path, { description: 'Given' }), 'failed', { description: 'Given' })
      t.equal(stored.url, server.url(path))
      t.equal(fetches(path), 1)
    })
  }
})

t.test('an empty HTML page cannot be used: failed, every field null', async (t) => {
  server.route('/empty', status(200, ''))
  await expectLink(t, await create('/empty'), 'failed', {})
  t.equal(fetches('/empty'), 1)
})

// ---- when autofill does not fetch, and what it never overwrites ----

const COMPLETE_PAGE = og('title', 'Page title') + og('description', 'Page description') + og('image', '/page.png') + '<link rel="icon" href="/page.ico">'
const FROM_PAGE = { title: 'Page title', description: 'Page description', image: `${origin}/page.png`, favicon: `${origin}/page.ico` }

t.test('autofill: false fetches nothing', async (t) => {
  serve('/skip/off', COMPLETE_PAGE)
  await expectLink(t, await create('/skip/off', {}, { autofill: false }), 'skipped', {})
  t.equal(fetches('/skip/off'), 0)
})

t.test('nothing empty: nothing fetched', async (t) => {
  serve('/skip/all-given', COMPLETE_PAGE)
  const given = { title: 'T', description: 'D', image: 'https://img.example/i.png', favicon: 'https://img.example/f.ico' }
  await expectLink(t, await create('/skip/all-given', given), 'skipped', given)
  t.equal(fetches('/skip/all-given'), 0)
})

t.test("the client's title is never overwritten; the other fields are filled", async (t) => {
  serve('/keep/title', COMPLETE_PAGE)
  await expectLink(t, await create('/keep/title', { title: 'Client title' }), 'filled', { ...FROM_PAGE, title: 'Client title' })
})

t.test('empty strings from the client count as empty and are filled', async (t) => {
  serve('/keep/empty-strings', COMPLETE_PAGE)
  const given = { title: '', description: 'Client description', image: '', favicon: 'https://img.example/f.ico' }
  await expectLink(t, await create('/keep/empty-strings', given), 'filled', {
    ...FROM_PAGE,
    description: 'Client description',
    favicon: 'https://img.example/f.ico',
  })
})

// ---- cache ----

t.test('a second link to the same page is filled from the cache', async (t) => {
  serve('/cache/page', COMPLETE_PAGE)
  await expectLink(t, await create('/cache/page'), 'filled', FROM_PAGE)
  await expectLink(t, await create('/cache/page'), 'filled', FROM_PAGE)
  t.equal(fetches('/cache/page'), 1)
})

t.test('a page that failed is not fetched again right away', async (t) => {
  server.route('/cache/failing', status(500))
  await expectLink(t, await create('/cache/failing'), 'failed', {})
  await expectLink(t, await create('/cache/failing'), 'failed', {})
  t.equal(fetches('/cache/failing'), 1)
})

t.test('concurrent links to a page nobody fetched yet cost one fetch', async (t) => {
  server.route('/cache/concurrent', delayed(200, page(html(COMPLETE_PAGE))))
  const responses = await Promise.all(Array.from({ length: 5 }, () => create('/cache/concurrent')))
  for (const response of responses) await expectLink(t, response, 'filled', FROM_PAGE)
  t.equal(fetches('/cache/concurrent'), 1)
})

// ---- update ----

t.test('update: a new url with title null fetches the new page and fills the title', async (t) => {
  const link = await bareLink('/update/old-a', { title: 'Old title' })
  serve('/update/new-a', COMPLETE_PAGE)
  const response = await api.update(link.uniq, { url: server.url('/update/new-a'), title: null })
  const { stored } = await expectLink(t, response, 'filled', FROM_PAGE, 200)
  t.equal(stored.url, server.url('/update/new-a'))
  t.equal(fetches('/update/old-a'), 0)
  t.equal(fetches('/update/new-a'), 1)
})

t.test('update: a title the client set stays when only the url changes', async (t) => {
  const link = await bareLink('/update/old-b', { title: 'Kept title' })
  serve('/update/new-b', COMPLETE_PAGE)
  const response = await api.update(link.uniq, { url: server.url('/update/new-b') })
  await expectLink(t, response, 'filled', { ...FROM_PAGE, title: 'Kept title' }, 200)
  t.equal(fetches('/update/new-b'), 1)
})

t.test('update: an empty link and autofill false fetch nothing', async (t) => {
  serve('/update/untouched', COMPLETE_PAGE)
  const link = await bareLink('/update/untouched')
  await expectLink(t, await api.update(link.uniq, {}), 'skipped', {}, 200)
  const noAutofill = await api.update(link.uniq, { note: 'no fetch' }, { autofill: false })
  await expectLink(t, noAutofill, 'skipped', {}, 200)
  t.equal(noAutofill.json().note, 'no fetch')
  t.equal(fetches('/update/untouched'), 0)
})

t.test('update: repeating what is stored (title null on a link without one) still fills what is empty after the merge', async (t) => {
  // Review core: a link created with autofill off, then sent {title: null} to have it filled, was answered "skipped".
  serve('/update/repeat', COMPLETE_PAGE)
  const link = await bareLink('/update/repeat')
  const response = await api.update(link.uniq, { title: null, url: server.url('/update/repeat') })
  await expectLink(t, response, 'filled', FROM_PAGE, 200)
  t.ok(response.json().updatedDate > link.updatedDate, 'written: a new updatedDate')
  t.equal(fetches('/update/repeat'), 1)
  const again = await api.update(link.uniq, { title: response.json().title })
  await expectLink(t, again, 'skipped', FROM_PAGE, 200)
  t.equal(again.json().updatedDate, response.json().updatedDate, 'nothing empty and nothing changed: nothing written')
})

t.test('update: changing only the note of a link with empty metadata fills it', async (t) => {
  serve('/update/note', COMPLETE_PAGE)
  const link = await bareLink('/update/note')
  const response = await api.update(link.uniq, { note: 'just a note' })
  await expectLink(t, response, 'filled', FROM_PAGE, 200)
  t.equal(response.json().note, 'just a note')
  t.equal(fetches('/update/note'), 1)
})

t.test('update: fields stored as "" count as empty and are filled, on both ways of writing an update', async (t) => {
  for (const [name, extra] of [['plain', {}], ['with pixels', { pixels: [{ platform: 'ga', value: 'G-EMPTY' }] }]] as const) {
    const path = `/update/empty-strings-${name.replace(' ', '-')}`
    serve(path, COMPLETE_PAGE)
    const link = await bareLink('/update/empty-start', { title: '', description: '' })
    t.equal(link.title, '', `${name}: stored as sent`)
    const response = await api.update(link.uniq, { url: server.url(path), ...extra })
    await expectLink(t, response, 'filled', FROM_PAGE, 200)
  }
})

t.test('create: a slug already taken is 409 before any page is fetched', async (t) => {
  serve('/taken/page', COMPLETE_PAGE)
  await bareLink('/taken/first', { id: 'taken-slug' })
  const response = await create('/taken/page', { id: 'TAKEN-slug' })
  t.equal(response.statusCode, 409)
  t.equal(response.json().code, 'slug_taken')
  t.equal(fetches('/taken/page'), 0, 'nothing fetched (and the quota slot was not held for a fetch)')
  t.equal(await prisma.link.count({ where: { url: server.url('/taken/page') } }), 0)
})

t.test('update: what another update stores while the page is fetched is kept (autofill never overwrites)', async (t) => {
  // Both ways of writing an update: one UPDATE, and the transaction of an update that replaces the pixels.
  for (const [name, extra] of [['plain', {}], ['with pixels', { pixels: [{ platform: 'ga', value: 'G-RACE' }] }]] as const) {
    const path = `/update/race-${name.replace(' ', '-')}`
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    server.route(path, async (request, response) => {
      await released
      page(html(COMPLETE_PAGE))(request, response)
    })
    const link = await bareLink('/update/race-start')
    const fetching = api.update(link.uniq, { url: server.url(path), ...extra })
    await until(() => fetches(path) > 0, 'the page to be fetched', 15_000, 5)
    const manual = await api.update(link.uniq, { title: 'Manual title', description: 'Manual description' }, { autofill: false })
    t.equal(manual.statusCode, 200, `${name}: the other update`)
    release()
    const response = await fetching
    t.equal(response.statusCode, 200, name)
    const expected = { ...FROM_PAGE, title: 'Manual title', description: 'Manual description' }
    t.same(fieldsOf(response.json()), expected, `${name}: the answer shows the other update's values, and the page's for the rest`)
    t.same(fieldsOf(await prisma.link.findUniqueOrThrow({ where: { uniq: link.uniq } })), expected, `${name}: and so does the stored link`)
  }
})

// ---- how pages are fetched, and what is logged ----

t.test('the User-Agent names the service', async (t) => {
  serve('/agent', title('Agent'))
  await expectLink(t, await create('/agent'), 'partial', { title: 'Agent', favicon: `${origin}/favicon.ico` })
  const [request] = server.requests('/agent')
  t.match(request.headers['user-agent'], /shortlinks-autofill/)
  t.match(request.headers.accept, /text\/html/)
})

t.test('a failure is logged with its reason, without the query string', async (t) => {
  server.route('/logged/failure', status(500))
  await expectLink(t, await create('/logged/failure?token=s3cret&page=2'), 'failed', {})
  const failures = logLines.filter((line) => /autofill failed/.test(line.msg))
  const line = failures.find((entry) => entry.autofill?.page?.includes('/logged/failure'))
  t.ok(line, 'a log line says autofill failed')
  t.strictSame(line?.autofill, { page: server.url('/logged/failure'), reason: 'the page answered 500' })
  t.equal(line?.level, 30, 'at info level')
  t.notMatch(JSON.stringify(logLines), /s3cret/, 'the query string is in no log line')
})
