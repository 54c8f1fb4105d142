/**
 * Step 5, the destination: the visitor's country (COUNTRY_HEADER) picks a geolocation rule, else the rotator
 * draws by weight among its entries and the link's url, else the url; the visit's query string is appended.
 */
import t from 'tap'
import { appendVisitQuery, chooseDestination, headerSafeUrl, visitorCountry } from '../../src/redirects/destination.js'
import { buildTestApp } from '../support/test-app.js'
import { acmeWorkspace, seededRandom, visit } from './visit-support.js'

let random = seededRandom(1)
const first = await buildTestApp(t, { redirects: { random: () => random() } })
const { app } = first
const { link } = await acmeWorkspace(first)

await link({
  id: 'geo',
  url: 'https://example.com/world',
  extraOptionsGeolocations: [
    { url: 'https://example.de/', value: 'de' },
    { url: 'https://example.fr/', value: 'FR' },
  ],
  extraOptionsLinkRotator: [{ url: 'https://example.com/b', value: 100 }],
})

t.test('the rule of the visitor\'s country; no usable country means no rule', async (t) => {
  const from = async (country?: string) =>
    (await visit(app, '/geo', { headers: country === undefined ? {} : { 'cf-ipcountry': country } })).headers.location
  t.equal(await from('DE'), 'https://example.de/')
  t.equal(await from('de'), 'https://example.de/', 'any case')
  t.equal(await from('FR'), 'https://example.fr/')
  // No rule: the rotator (whose one entry has all the weight) decides.
  for (const country of [undefined, '', 'US', 'XX', 'T1', 'DEU', 'D', '1E', ' ']) {
    t.equal(await from(country), 'https://example.com/b', `country ${JSON.stringify(country)}`)
  }
})

t.test('COUNTRY_HEADER names another header', async (t) => {
  const { app: custom } = await buildTestApp(t, { database: first.database, env: { COUNTRY_HEADER: 'X-Country' } })
  await custom.redirects.domains.refresh()
  t.equal((await visit(custom, '/geo', { headers: { 'x-country': 'DE' } })).headers.location, 'https://example.de/')
  t.equal((await visit(custom, '/geo', { headers: { 'cf-ipcountry': 'DE' } })).headers.location, 'https://example.com/b')
})

t.test('visitorCountry', async (t) => {
  t.equal(visitorCountry('de'), 'DE')
  t.equal(visitorCountry(' GB '), 'GB')
  for (const value of [undefined, '', 'XX', 'xx', 'T1', 'A', 'ABC', '12', ['DE', 'FR']]) t.equal(visitorCountry(value), null, String(value))
})

t.test('the rotator: weights hold over many draws (seeded), the url gets the remaining percent', async (t) => {
  await link({
    id: 'rotate',
    url: 'https://example.com/own',
    extraOptionsLinkRotator: [
      { url: 'https://example.com/a', value: 50 },
      { url: 'https://example.com/b', value: '30' },
    ],
  })
  random = seededRandom(20310601)
  const draws = 4000
  const counts: Record<string, number> = {}
  for (let i = 0; i < draws; i++) {
    const location = (await visit(app, '/rotate')).headers.location as string
    counts[location] = (counts[location] ?? 0) + 1
  }
  // Each share within 4 standard deviations of its expectation (binomial), which a correct draw misses
  // about once in 16,000 runs with a random seed, and never with this one.
  for (const [url, share] of [['https://example.com/a', 0.5], ['https://example.com/b', 0.3], ['https://example.com/own', 0.2]] as const) {
    const expected = draws * share
    const bound = 4 * Math.sqrt(draws * share * (1 - share))
    t.ok(Math.abs((counts[url] ?? 0) - expected) <= bound, `${url}: ${counts[url]} of ${draws}, expected ${expected} ± ${bound.toFixed(0)}`)
  }
  t.same(Object.keys(counts).sort(), ['https://example.com/a', 'https://example.com/b', 'https://example.com/own'])
})

t.test('chooseDestination: the draw maps onto the weights in order, the url takes the rest', async (t) => {
  const target = (url: string) => ({ url, location: url })
  const rules = {
    target: target('own'),
    geolocations: new Map([['DE', target('de')]]),
    rotator: [{ ...target('a'), weight: 50 }, { ...target('b'), weight: 30 }],
  }
  t.equal(chooseDestination(rules, 'DE', () => 0).url, 'de')
  t.equal(chooseDestination(rules, null, () => 0).url, 'a')
  t.equal(chooseDestination(rules, null, () => 0.4999).url, 'a')
  t.equal(chooseDestination(rules, null, () => 0.5).url, 'b')
  t.equal(chooseDestination(rules, null, () => 0.7999).url, 'b')
  t.equal(chooseDestination(rules, null, () => 0.8).url, 'own')
  t.equal(chooseDestination(rules, 'US', () => 0.9999).url, 'own')
  t.equal(chooseDestination({ ...rules, rotator: [{ ...target('all'), weight: 100 }] }, null, () => 0.9999).url, 'all')
  t.equal(chooseDestination({ ...rules, rotator: [] }, null, () => 0).url, 'own')
})

t.test('the visit\'s query string is appended; a parameter the destination sets keeps its value', async (t) => {
  await link({ id: 'query', url: 'https://example.com/p?utm_source=mail&keep=1#top' })
  const location = (await visit(app, '/query?utm_source=x&ref=abc&keep=2&empty=&flag')).headers.location
  t.equal(location, 'https://example.com/p?utm_source=mail&keep=1&ref=abc&empty=&flag#top')

  const cases: [string, string, string][] = [
    ['https://e.com/', '', 'https://e.com/'],
    ['https://e.com/', 'a=1', 'https://e.com/?a=1'],
    ['https://e.com/?', 'a=1', 'https://e.com/?a=1'],
    ['https://e.com/?x=1&', 'a=1', 'https://e.com/?x=1&a=1'],
    ['https://e.com/?a=1', 'a=2&a=3', 'https://e.com/?a=1'],
    ['https://e.com/?a+b=1', 'a%20b=2&c=3', 'https://e.com/?a+b=1&c=3'],
    ['https://e.com/#f', 'a=1&&b=2', 'https://e.com/?a=1&b=2#f'],
    ['https://e.com/', 'q=%E2%82%AC&bad=%zz', 'https://e.com/?q=%E2%82%AC&bad=%zz'],
    ['https://e.com/', 'x=a#b', 'https://e.com/?x=a%23b'],
    ['https://e.com/', 'x=\u00e9', 'https://e.com/?x=%E9'],
    // What a URI cannot hold is escaped (a browser escapes the first three itself); reserved characters and escapes stay.
    ['https://e.com/', 'x="<>&y={}|^`\\&z=[]:/?@!$\'()*+,;=%41', 'https://e.com/?x=%22%3C%3E&y=%7B%7D%7C%5E%60%5C&z=[]:/?@!$\'()*+,;=%41'],
  ]
  for (const [destination, query, expected] of cases) t.equal(appendVisitQuery(destination, query), expected, `${destination} + ${query}`)
})

t.test('a destination with characters a header cannot hold is sent as a browser would request it', async (t) => {
  t.equal(headerSafeUrl('https://example.com/ascii?x=1'), 'https://example.com/ascii?x=1')
  t.equal(headerSafeUrl('https://bücher.example/straße?q=ü'), 'https://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%BC')
  // ASCII characters a URI cannot hold (the API takes them, as browsers do): escaped as the pages escape them.
  t.equal(headerSafeUrl('https://example.com/a"<>`{}|^b?x="<>{}|^#f{"}'), 'https://example.com/a%22%3C%3E%60%7B%7D%7C%5Eb?x=%22%3C%3E%7B%7D%7C%5E#f{%22}')
  // A fragment keeps what browsers keep in one (a hash router reads it as the link holds it).
  t.equal(headerSafeUrl('https://example.com/p|q#/a|b#c?{d}^'), 'https://example.com/p%7Cq#/a|b#c?{d}^')
  t.equal(headerSafeUrl('https://example.com/p#a#b'), 'https://example.com/p#a#b')
  t.equal(headerSafeUrl('https://example.com/a%20b?q=[1]&r=$@!*'), 'https://example.com/a%20b?q=[1]&r=$@!*', 'escapes and reserved characters as stored')
  await link({ id: 'odd-ascii', url: 'https://example.com/a"b|c' })
  t.equal((await visit(app, '/odd-ascii?x=<y>')).headers.location, 'https://example.com/a%22b%7Cc?x=%3Cy%3E')
  const created = await link({ id: 'unicode', url: 'https://bücher.example/straße' })
  t.ok(created.uniq)
  const response = await visit(app, '/unicode?q=1')
  t.equal(response.statusCode, 302)
  t.equal(response.headers.location, 'https://xn--bcher-kva.example/stra%C3%9Fe?q=1')
})
