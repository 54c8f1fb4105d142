/**
 * REDIS_URL's database index (review ops): ioredis, when SELECT fails, goes on in database 0, where the quota
 * counters and keys would mix with whatever else uses it. A Redis that lacks the index stops the start, naming
 * REDIS_URL; an index it has is used.
 */
import t from 'tap'
import { buildApp } from '../../src/app.js'
import { openTestDatabase, testAutofill, testConfig } from '../support/test-app.js'

const redisUrl = process.env.REDIS_URL
const needsRedis = { skip: !redisUrl && 'needs REDIS_URL' }
const { database } = await openTestDatabase(t)

const withIndex = (index: number) => {
  const url = new URL(redisUrl!)
  url.pathname = `/${index}`
  return url.toString()
}

t.test('a database index this Redis does not have stops the start with a message naming REDIS_URL', needsRedis, async (t) => {
  const databases = 100_000 // more than any Redis is configured with
  await t.rejects(
    buildApp({ config: testConfig({ REDIS_URL: withIndex(databases - 1) }), database, logger: false, autofill: testAutofill() }),
    { name: 'ConfigError', message: /REDIS_URL names database 99999, which this Redis does not have/ },
  )
})

t.test('the index given as ?db= is checked alike', needsRedis, async (t) => {
  const url = new URL(redisUrl!)
  url.pathname = ''
  url.searchParams.set('db', '99999')
  await t.rejects(buildApp({ config: testConfig({ REDIS_URL: url.toString() }), database, logger: false, autofill: testAutofill() }), {
    name: 'ConfigError',
    message: /REDIS_URL names database 99999/,
  })
})

t.test('an index it has is the one used', needsRedis, async (t) => {
  const app = await buildApp({ config: testConfig({ REDIS_URL: withIndex(3), REDIS_KEY_PREFIX: `index-test-${process.pid}:` }), database, logger: false, autofill: testAutofill() })
  t.teardown(() => app.close())
  await app.ready()
  const info = (await app.redis!.call('CLIENT', 'INFO')) as string
  t.match(info, / db=3 /, 'the connection is in database 3')
})
