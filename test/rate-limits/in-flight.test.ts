/**
 * Issue 9, item 5: requests in flight hold no quota slot they may never use. Creates whose bodies arrive
 * slowly over real HTTP, and turn out invalid, take no slot while they upload: a valid create meanwhile
 * succeeds, and a 429's Retry-After says when a slot really frees (on a clock the test drives).
 */
import type { AddressInfo } from 'node:net'
import { request } from 'node:http'
import t from 'tap'
import { until } from '../support/polling.js'
import { buildTestApp, client } from '../support/test-app.js'
import { FakeClock, quotaHeaders, quotaWorkspace, T0 } from './quota-support.js'

const clock = new FakeClock()
const { app, prisma } = await buildTestApp(t, { rateLimits: { now: clock.now } })
/** Creates whose headers the server has read and whose body it is waiting for. */
let uploading = 0
app.addHook('preParsing', async (request, _reply, payload) => {
  if (request.url === '/v1/links/create') uploading++
  return payload
})
await app.listen({ port: 0, host: '127.0.0.1' })
const { port } = app.server.address() as AddressInfo

/** A create over HTTP that sends its headers and half its body now, the rest when told. */
function slowCreate(token: string, body: string) {
  const req = request({
    host: '127.0.0.1',
    port,
    method: 'POST',
    path: '/v1/links/create',
    headers: { 'api-authorization': token, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
  })
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => (text += chunk))
      res.on('end', () => resolve({ status: res.statusCode!, body: text }))
    })
    req.on('error', reject)
  })
  const half = Math.floor(body.length / 2)
  req.write(body.slice(0, half))
  return {
    finish() {
      req.end(body.slice(half))
      return answer
    },
  }
}

t.test('slow invalid creates in flight do not make a valid create get 429', async (t) => {
  clock.set(T0)
  const ws = await quotaWorkspace(prisma, 'in flight', { hour: 3, day: 100 })
  const api = client(app, ws.token)
  // The workspace's quotas are read once and cached (2 s of the test's clock), so that what follows involves
  // no database round trip between a request's arrival and its quota decision.
  t.equal((await api.create({ url: 'not a url' })).statusCode, 400)

  const slow = Array.from({ length: 3 }, () => slowCreate(ws.token, JSON.stringify({ link: { url: 'not a url either' } })))
  await until(() => uploading >= 4, 'four slow creates uploading', 10_000, 5)
  // Whatever the route does on arrival (its own hooks, the in-process store) is done within this turn.
  await new Promise((resolve) => setImmediate(resolve))

  const valid = await api.create({ url: 'https://example.com/in-flight' })
  t.equal(valid.statusCode, 201, `a valid create while three invalid ones upload: ${valid.body}`)
  t.equal(quotaHeaders(valid).remaining, '2', 'it took the first slot; the uploads hold none')

  const answers = await Promise.all(slow.map((upload) => upload.finish()))
  t.same(answers.map((answer) => answer.status), [400, 400, 400])

  clock.advance(2)
  for (let i = 1; i <= 2; i++) t.equal((await api.create({ url: `https://example.com/more/${i}` })).statusCode, 201)
  const refused = await api.create({ url: 'https://example.com/one-too-many' })
  t.equal(refused.statusCode, 429)
  // The first create, taken at T0, counts until T0 + 3600 s: 3598 s from now, and no sooner.
  t.equal(refused.headers['retry-after'], '3598')
  clock.advance(3597)
  t.equal((await api.create({ url: 'https://example.com/early' })).statusCode, 429, 'one second early: still full')
  clock.advance(1)
  t.equal((await api.create({ url: 'https://example.com/on-time' })).statusCode, 201, 'after exactly Retry-After: a slot')
})
