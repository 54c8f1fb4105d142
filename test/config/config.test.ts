import t from 'tap'
import { loadConfig } from '../../src/config/config.js'

t.test('defaults', async (t) => {
  const config = loadConfig({})
  t.match(config, {
    port: 3000,
    host: '127.0.0.1',
    databaseUrl: undefined,
    dataDir: './data',
    redisUrl: undefined,
    defaultDomain: 'short.localhost',
    reservedDomains: ['short.localhost', 'links.localhost'],
    logLevel: 'info',
    trustProxy: false,
    countryHeader: 'cf-ipcountry',
    autofill: { timeoutMs: 3000, maxBytes: 1048576, allowPrivate: false },
    rateLimitOnRedisError: 'allow',
    cookieSecret: undefined,
    redisKeyPrefix: '',
    metricsToken: undefined,
    overload: { eventLoopDelayMs: 1000, dbPoolWaiting: 100 },
  })
  t.same(loadConfig({ OVERLOAD_EVENT_LOOP_DELAY_MS: '0', OVERLOAD_DB_POOL_WAITING: '25' }).overload, { eventLoopDelayMs: 0, dbPoolWaiting: 25 })
  t.equal(loadConfig({ METRICS_TOKEN: 'm'.repeat(16) }).metricsToken, 'm'.repeat(16))
  t.equal(loadConfig({ COOKIE_SECRET: 'x'.repeat(32) }).cookieSecret, 'x'.repeat(32))
})

t.test('values are parsed and normalised', async (t) => {
  const config = loadConfig({
    PORT: '8080',
    DEFAULT_DOMAIN: 'Go.Brand.COM',
    RESERVED_DOMAINS: 'go.brand.com, bücher.example',
    TRUST_PROXY: '10.0.0.0/8,127.0.0.1',
    COUNTRY_HEADER: 'X-Country',
    AUTOFILL_ALLOW_PRIVATE: 'true',
    RATE_LIMIT_ON_REDIS_ERROR: 'deny',
    DATABASE_URL: 'postgresql://u@db:5432/x',
    REDIS_URL: 'redis://cache:6379',
    EMPTY_IS_UNSET: '',
    PORT_UNUSED: 'ignored',
  })
  t.equal(config.port, 8080)
  t.equal(config.defaultDomain, 'go.brand.com')
  t.same(config.reservedDomains, ['go.brand.com', 'xn--bcher-kva.example'])
  t.same(config.trustProxy, ['10.0.0.0/8', '127.0.0.1'])
  t.equal(config.countryHeader, 'x-country')
  t.equal(config.autofill.allowPrivate, true)
  t.equal(config.rateLimitOnRedisError, 'deny')
  t.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2)
  t.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true)
  t.equal(loadConfig({ PORT: '' }).port, 3000, 'an empty variable counts as unset')
  t.equal(loadConfig({ REDIS_KEY_PREFIX: 'prod:' }).redisKeyPrefix, 'prod:')
})

t.test('an IPv4 address written as usual is still a valid DEFAULT_DOMAIN (as it was)', async (t) => {
  const config = loadConfig({ DEFAULT_DOMAIN: '192.168.1.50', RESERVED_DOMAINS: '192.168.1.50,links.localhost' })
  t.equal(config.defaultDomain, '192.168.1.50')
})

t.test('an invalid value stops the start with a message naming the variable', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ PORT: 'eighty' }, /PORT/],
    [{ PORT: '70000' }, /PORT/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of: fatal, error, warn, info, debug, trace, silent/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL/],
    [{ REDIS_URL: 'http://x' }, /REDIS_URL/],
    [{ AUTOFILL_TIMEOUT_MS: '0' }, /AUTOFILL_TIMEOUT_MS/],
    [{ AUTOFILL_MAX_BYTES: 'lots' }, /AUTOFILL_MAX_BYTES/],
    [{ AUTOFILL_ALLOW_PRIVATE: 'maybe' }, /AUTOFILL_ALLOW_PRIVATE/],
    [{ RATE_LIMIT_ON_REDIS_ERROR: 'ignore' }, /RATE_LIMIT_ON_REDIS_ERROR/],
    [{ COOKIE_SECRET: 'too short' }, /COOKIE_SECRET/],
    [{ DEFAULT_DOMAIN: 'not a host!' }, /DEFAULT_DOMAIN/],
    // Forms of an address that would be kept as another text (1.2.0.3, 127.0.0.1).
    [{ DEFAULT_DOMAIN: '1.2.3', RESERVED_DOMAINS: '1.2.3' }, /DEFAULT_DOMAIN: "1\.2\.3" is not a valid host name/],
    [{ DEFAULT_DOMAIN: '2130706433', RESERVED_DOMAINS: '2130706433' }, /DEFAULT_DOMAIN/],
    [{ RESERVED_DOMAINS: 'a.test,bad host' }, /RESERVED_DOMAINS/],
    [{ DEFAULT_DOMAIN: 'x.test', RESERVED_DOMAINS: 'a.test,b.test' }, /RESERVED_DOMAINS must include DEFAULT_DOMAIN/],
    [{ TRUST_PROXY: 'sometimes' }, /TRUST_PROXY/],
    // A brace would make the prefix the keys' Redis Cluster hash tag, sending every workspace to one slot.
    [{ REDIS_KEY_PREFIX: '{prod}:' }, /REDIS_KEY_PREFIX/],
    [{ REDIS_KEY_PREFIX: 'has space' }, /REDIS_KEY_PREFIX/],
    [{ METRICS_TOKEN: 'short' }, /METRICS_TOKEN/],
    [{ METRICS_TOKEN: 'metrics token with space' }, /METRICS_TOKEN must match pattern/],
    [{ OVERLOAD_EVENT_LOOP_DELAY_MS: '-1' }, /OVERLOAD_EVENT_LOOP_DELAY_MS/],
    [{ OVERLOAD_DB_POOL_WAITING: 'many' }, /OVERLOAD_DB_POOL_WAITING/],
    // Passed the checks before, then failed the start with a stack trace, or read as something else.
    [{ TRUST_PROXY: '999.1.1.1' }, /TRUST_PROXY/],
    [{ TRUST_PROXY: '1.2.3.4/99' }, /TRUST_PROXY/],
    [{ TRUST_PROXY: '::::' }, /TRUST_PROXY/],
    [{ REDIS_URL: 'redis://x:notaport' }, /REDIS_URL is not a valid URL/],
    // ioredis would SELECT NaN, fail, and go on in database 0.
    [{ REDIS_URL: 'redis://x:6379/abc' }, /REDIS_URL: the database index/],
    [{ REDIS_URL: 'redis://x:6379/1/2' }, /REDIS_URL: the database index/],
    [{ REDIS_URL: 'redis://x:6379?db=abc' }, /REDIS_URL: the database index/],
    [{ DATABASE_URL: 'postgresql://u:secret@127.0.0.1:notaport/db' }, /DATABASE_URL is not a valid URL/],
    [{ PORT: '0x0BB9' }, /PORT must be a whole number/],
    [{ PORT: '1e3' }, /PORT must be a whole number/],
    [{ AUTOFILL_TIMEOUT_MS: '1.5' }, /AUTOFILL_TIMEOUT_MS/],
    [{ COUNTRY_HEADER: 'CF IPCountry' }, /COUNTRY_HEADER/],
    [{ COUNTRY_HEADER: 'x-country:' }, /COUNTRY_HEADER/],
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
  }
  t.throws(() => loadConfig({ DATABASE_URL: 'postgresql://u:secret@127.0.0.1:notaport/db' }), { message: /^(?!.*secret)/ }, 'the password is not repeated')
})

t.test('blank values count as unset, in the environment and in .env alike; the environment wins over .env', async (t) => {
  const blank = loadConfig({ PORT: ' ', HOST: ' ', OVERLOAD_EVENT_LOOP_DELAY_MS: ' ', OVERLOAD_DB_POOL_WAITING: '\t', VISIT_RETENTION_DAYS: ' ' })
  t.equal(blank.port, 3000, 'not 0, a random port')
  t.equal(blank.host, '127.0.0.1')
  t.same(blank.overload, { eventLoopDelayMs: 1000, dbPoolWaiting: 100 }, 'overload protection not turned off by a blank')
  t.equal(blank.visitRetentionDays, 400)
  t.equal(loadConfig({ PORT: ' 8080 ' }).port, 8080, 'spaces around a number')
  t.equal(loadConfig({ LOG_LEVEL: ' debug\t' }).logLevel, 'debug', 'and around any other value')
  t.equal(loadConfig({ DEFAULT_DOMAIN: 'links.localhost ' }).defaultDomain, 'links.localhost')
  t.same(loadConfig({ TRUST_PROXY: '10.0.0.0/8, ::1, fd00::/8' }).trustProxy, ['10.0.0.0/8', '::1', 'fd00::/8'])

  const dir = t.testdir({ '.env': 'COOKIE_SECRET=\nMETRICS_TOKEN=   \nREDIS_URL=redis://from-file:6379\nPORT=4000\n' })
  const fromFile = loadConfig({}, { dotenv: `${dir}/.env` })
  t.equal(fromFile.cookieSecret, undefined, 'COOKIE_SECRET= in .env is unset (as .env.example has it commented out)')
  t.equal(fromFile.metricsToken, undefined)
  t.equal(fromFile.redisUrl, 'redis://from-file:6379')
  t.equal(fromFile.port, 4000)
  const overridden = loadConfig({ REDIS_URL: '', PORT: '5000' }, { dotenv: `${dir}/.env` })
  t.equal(overridden.redisUrl, undefined, 'REDIS_URL= in the environment unsets the value of .env')
  t.equal(overridden.port, 5000)
  t.equal(loadConfig({}, { dotenv: `${dir}/missing.env` }).port, 3000, 'no .env: defaults')
})

t.test('PUBLIC_URL: the servers entry of the OpenAPI document; default the listen address', async (t) => {
  t.equal(loadConfig({}).publicUrl, 'http://127.0.0.1:3000')
  t.equal(loadConfig({ HOST: '0.0.0.0', PORT: '8080' }).publicUrl, 'http://localhost:8080', 'a wildcard host is shown as localhost')
  t.equal(loadConfig({ HOST: '::1' }).publicUrl, 'http://[::1]:3000')
  t.equal(loadConfig({ PUBLIC_URL: 'https://API.brand.com/' }).publicUrl, 'https://api.brand.com', 'no trailing slash')
  t.equal(loadConfig({ PUBLIC_URL: 'https://brand.com/links/' }).publicUrl, 'https://brand.com/links', 'a base path is kept')
  for (const bad of ['api.brand.com', 'ftp://brand.com', 'https://brand.com/?x=1', 'https://u:p@brand.com']) {
    t.throws(() => loadConfig({ PUBLIC_URL: bad }), /PUBLIC_URL/, bad)
  }
  t.throws(() => loadConfig({ PUBLIC_URL: 'https://user:s3cret@brand.com' }), { message: /^PUBLIC_URL must be an http\(s\) URL without credentials/ })
  t.throws(() => loadConfig({ PUBLIC_URL: 'https://user:s3cret@brand.com' }), { message: /^(?!.*s3cret)/ }, 'the password is not repeated')
  t.throws(() => loadConfig({ PUBLIC_URL: 'ftp://brand.com' }), { message: 'PUBLIC_URL "ftp://brand.com" must be an http(s) URL without credentials, query or fragment' })
})
