/**
 * The head as an HTML tokenizer reads it (src/autofill/head-scan.ts): where it ends, the tags autofill keeps, and
 * the charset a meta declares. The pages themselves are tested end to end in pages.test.ts.
 */
import t from 'tap'
import { HeadEnd, headTags, MAX_KEPT_TOTAL, MAX_KEPT_VALUE, metaCharset } from '../../src/autofill/head-scan.js'

const endOf = (...pieces: string[]) => {
  const head = new HeadEnd()
  for (const piece of pieces) if (head.write(piece) >= 0) break
  return head.end
}

t.test('where the head ends', async (t) => {
  const page = '<html><head><title>T</title></head><body>'
  t.equal(endOf(page), page.indexOf('<body>'), 'just after </head>')
  t.equal(endOf('<html><head><title>T</ti', 'tle></he', 'ad><body>'), '<html><head><title>T</title></head>'.length, 'a close tag split across pieces')
  t.equal(endOf('<head><meta charset="utf-8"><body><p>'), '<head><meta charset="utf-8">'.length, 'at <body> when </head> is left out')
  // Heads hold what browsers would take for the body's start: the Meta pixel's and Google Tag Manager's snippets.
  t.equal(endOf('<head><noscript><img src="/px"></noscript><noscript><iframe src="/gtm"></iframe></noscript><div hidden></div><meta>'), -1, 'not at <noscript><img>, <iframe> or a <div>')
  t.equal(endOf('<head><!-- </head> --><script>"</head><body>"</script><style>p{}</style><noscript></noscript>'), -1, 'not in a comment, a script or a style')
  t.equal(endOf('<head><title>T</title><meta name="a" content="</head>">'), -1, 'not in an attribute value')
})

t.test('the tags kept: the first title, open graph, twitter and description metas, icon links; nothing after the head', async (t) => {
  const noise = '<meta name="keywords" content="k"><link rel="stylesheet" href="/s.css"><script>var x = 1</script>'.repeat(10_000)
  const { html: doc, icons } = await headTags(
    `<html><head>${noise}<svg><title>Icon</title></svg><noscript><img src="/px"></noscript><title>A &amp; B</title><title>Second</title><meta property="og:title" content="O &quot;T&quot;">` +
      `<meta name="twitter:image" content="/i.png"><meta name="description" content="D <b>">${noise}` +
      '<link rel="shortcut icon" href="/f.ico"></head><body><meta property="og:description" content="from the body"></body></html>',
  )
  t.equal(
    doc,
    '<!doctype html><html><head><title>A &amp; B</title><meta property="og:title" content="O &quot;T&quot;">' +
      '<meta name="twitter:image" content="/i.png"><meta name="description" content="D &lt;b>">' +
      '<link rel="shortcut icon" href="/f.ico"></head><body></body></html>',
  )
  t.same(icons, ['/f.ico'])
})

t.test('metas named as open-graph-scraper reads them: an empty property, itemprop, a value attribute', async (t) => {
  const { html: doc } = await headTags(
    '<head><meta property="" name="twitter:title" content="T"><meta itemprop="description" content="D"><meta property="og:title" value="V">',
  )
  t.equal(
    doc,
    '<!doctype html><html><head><meta property="" name="twitter:title" content="T"><meta itemprop="description" content="D">' +
      '<meta property="og:title" value="V"></head><body></body></html>',
  )
})

t.test('at most 200 read metas and 20 icon links are kept', async (t) => {
  const { html: doc, icons } = await headTags(`<head>${'<meta property="og:image" content="/i.png">'.repeat(500)}${'<link rel="icon" href="/f.ico">'.repeat(50)}`)
  t.equal(doc.split('<meta ').length - 1, 200)
  t.equal(doc.split('<link ').length - 1, 20)
  t.equal(icons.length, 20)
})

t.test('kept values are bounded, and so is the whole kept document: a hostile head costs the scraper little', async (t) => {
  // A megabyte-long og:title and title text (a surrogate pair across the cut), then megabytes of read tags.
  const long = 'T'.repeat(MAX_KEPT_VALUE - 1) + '😀' + 'T'.repeat(1_000_000)
  const { html: doc, icons } = await headTags(
    `<head><title>${long}</title><meta property="og:title" content="${long}">` +
      `${`<meta property="og:description" content="${'d'.repeat(5000)}">`.repeat(199)}<link rel="icon" href="/late.ico">`,
  )
  t.ok(doc.length <= MAX_KEPT_TOTAL + MAX_KEPT_VALUE + 200, `the document is ${doc.length} characters`)
  t.match(doc, new RegExp(`<title>T{${MAX_KEPT_VALUE - 1}}</title>`), 'the title cut before the pair it would split')
  t.match(doc, new RegExp(`<meta property="og:title" content="T{${MAX_KEPT_VALUE - 1}}">`))
  t.same(icons, [], 'once the document is full, nothing after is kept: no later tag can win over one left out')
})

t.test('a long value of white space before its text keeps the text', async (t) => {
  const spaces = ' \n'.repeat(10_000)
  const { html: doc } = await headTags(`<head><title>${spaces}Real title</title><meta property="og:title" content="${spaces}Real og">`)
  t.match(doc, /<title> Real title<\/title>/)
  t.match(doc, /content=" Real og"/)
})

t.test('tags past the bound are not kept, whatever their length (a kept tag never loses to a later, shorter one)', async (t) => {
  const junk = `<meta property="og:image:alt" content="${'x'.repeat(1000)}">`.repeat(Math.ceil(MAX_KEPT_TOTAL / 1000))
  const { html: doc } = await headTags(`<head>${junk}<meta property="og:title" content="${'L'.repeat(90)}"><meta name="twitter:title" content="Tw">`)
  t.notMatch(doc, /twitter:title/, 'the shorter twitter:title after the bound is not kept either')
})

t.test('the charset a meta declares', async (t) => {
  const contentTypeCharset = (value: string) => /charset=([\w-]+)/i.exec(value)?.[1].toLowerCase()
  t.equal(metaCharset('<meta charset="Windows-1251">', contentTypeCharset), 'windows-1251')
  t.equal(metaCharset('<meta http-equiv="Content-Type" content="text/html; charset=KOI8-R">', contentTypeCharset), 'koi8-r')
  t.equal(metaCharset('<meta name="description" content="charset=koi8-r"><meta charset="utf-8">', contentTypeCharset), 'utf-8', 'not from another attribute')
  t.equal(metaCharset('<!-- <meta charset="koi8-r"> --><meta charset="utf-8">', contentTypeCharset), 'utf-8', 'not from a comment')
  t.equal(metaCharset('<meta name="x"><title>charset=koi8-r</title>', contentTypeCharset), undefined)
})
