/** The pages' escaping module, context by context: HTML text, attributes, URLs and data inside <script>. */
import t from 'tap'
import { escapeHtml, html, httpOrigin, httpUrl, jsonForScript, jsonScript, raw, SafeHtml } from '../../../src/redirects/pages/html.js'
import { byTag, elements } from './parse.js'

const HOSTILE = `</title><script>alert(1)</script>"' onmouseover="alert(2)" &amp; <!-- \u2028\u2029`

t.test('escapeHtml replaces the five characters that can end text or a quoted attribute', async (t) => {
  t.equal(escapeHtml(`<a href="x" title='y'>&</a>`), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;')
  t.equal(escapeHtml('plain text, é ü 😀'), 'plain text, é ü 😀')
})

t.test('html`` escapes every value in text and in attributes; a browser reads back exactly the value', async (t) => {
  const page = html`<p title="${HOSTILE}">${HOSTILE}</p><span data-x='${HOSTILE}'>${HOSTILE}</span>`.value
  const [p] = byTag(page, 'p')
  t.equal(p.attrs.title, HOSTILE)
  t.equal(p.text, HOSTILE)
  t.same(Object.keys(p.attrs), ['title'], 'no attribute was injected')
  const [span] = byTag(page, 'span')
  t.equal(span.attrs['data-x'], HOSTILE, 'single-quoted attributes too')
  t.equal(byTag(page, 'script').length, 0)
  t.same(elements(page).map((element) => element.tag), ['html', 'head', 'body', 'p', 'span'])
})

t.test('html`` inserts SafeHtml as it is, joins arrays, and writes nothing for null, undefined and false', async (t) => {
  const items = ['<a>', 'b'].map((item) => html`<li>${item}</li>`)
  t.equal(html`<ul>${items}</ul>`.value, '<ul><li>&lt;a&gt;</li><li>b</li></ul>')
  t.equal(html`${null}${undefined}${false}${0}${raw('<br>')}`.value, '0<br>')
  t.ok(html`x` instanceof SafeHtml)
  t.equal(String(html`<b>${'&'}</b>`), '<b>&amp;</b>')
})

t.test('httpUrl keeps absolute http(s) URLs (normalised) and drops every other scheme', async (t) => {
  t.equal(httpUrl('https://example.com/a b?q="x"'), 'https://example.com/a%20b?q=%22x%22')
  t.equal(httpUrl('HTTP://Example.COM'), 'http://example.com/')
  t.equal(httpUrl('  https://example.com/  '), 'https://example.com/')
  for (const bad of ['javascript:alert(1)', ' JavaScript:alert(1)', 'java\tscript:alert(1)', 'data:text/html,<script>alert(1)</script>',
    'vbscript:x', 'file:///etc/passwd', '//evil.example/', '/relative', 'not a url', '', null, undefined]) {
    t.equal(httpUrl(bad), null, `${JSON.stringify(bad)} is dropped`)
  }
  t.equal(httpOrigin('https://example.com:8443/path?q'), 'https://example.com:8443')
  t.equal(httpOrigin('javascript:alert(1)'), null)
})

t.test('a URL with quotes and angle brackets stays inside its attribute', async (t) => {
  const url = httpUrl(`https://example.com/it's"><script>alert(1)</script>`)!
  const [a] = byTag(html`<a href="${url}">x</a>`.value, 'a')
  t.equal(a.attrs.href, url)
  t.equal(byTag(html`<a href="${url}">x</a>`.value, 'script').length, 0)
})

t.test('jsonForScript: no <, >, &, U+2028 or U+2029 inside the <script>, and JSON.parse reads the data back', async (t) => {
  const data = { text: HOSTILE, more: ['</script><script>alert(1)</script>', "'});alert(1)//", '<!--<script>'] }
  const json = jsonForScript(data)
  t.notMatch(json, /[<>&\u2028\u2029]/)
  t.same(JSON.parse(json), data)
})

t.test('jsonScript makes one inert data block whose text is the JSON', async (t) => {
  const data = { value: '</script><script>alert(1)</script>', other: "'});alert(1)//" }
  const page = jsonScript('page-data', data).value
  const scripts = byTag(page, 'script')
  t.equal(scripts.length, 1, 'the value did not close the block')
  t.equal(scripts[0].attrs.type, 'application/json')
  t.equal(scripts[0].attrs.id, 'page-data')
  t.same(JSON.parse(scripts[0].text), data)
})
