/**
 * What the costliest bodies cost to validate (issue 9, item 17): `npm run bench:validation`.
 *
 * Each case is a body at the 64 KiB limit built to cost validation the most per byte: an array field of a
 * link full of elements that all fail (test/support/worst-cases.ts), values nested as deep as the limit
 * allows, strings that all hold a NUL or a lone surrogate, and a large valid link for reference. Each is
 * sent RUNS times to the real app (app.inject: auth, parsing, the checks, AJV, the error body) after a
 * warm-up, and also validated alone with the very functions the routes use (JSON.parse, the client-data
 * walk, the route's compiled AJV validator, the error list). Prints the slowest and the median of both per
 * case, with the machine's load: figures, not assertions. Target: every case under 20 ms.
 *
 * Options (environment): BENCH_RUNS (default 10), BENCH_BYTES (body size, default 65536), DATABASE_URL
 * (default: an in-memory PGlite; validation does not touch the database, authentication does).
 */
import { availableParallelism, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { COUNTRY_CODES } from '../schemas/country-codes.js'
import { CreateLinkBody } from '../schemas/link.js'
import { buildApp } from '../src/app.js'
import { validationFailed } from '../src/errors/app-error.js'
import { clientDataProblems } from '../src/plugins/client-data.js'
import { BODY_LIMIT } from '../src/plugins/errors.js'
import { compileBodyValidator, fieldErrors } from '../src/plugins/validation.js'
import { createWorkspaceToken, openTestDatabase, testAutofill, testConfig } from '../test/support/test-app.js'
import { WORST_CASES, worstCaseBody } from '../test/support/worst-cases.js'

const RUNS = Number(process.env.BENCH_RUNS ?? 10)
const BYTES = Number(process.env.BENCH_BYTES ?? BODY_LIMIT)
const WARM_UP = 2

/** Strings as short as JSON allows, each at fault, in an array up to the size. */
function manyStrings(text: string): string {
  const empty = '{"link":{"url":"https://example.com/","note":[]}}'
  const item = JSON.stringify(text)
  return empty.replace('[]', `[${Array(Math.floor((BYTES - empty.length) / (item.length + 1))).fill(item).join(',')}]`)
}

function deepest(): string {
  const empty = '{"link":{"url":"https://example.com/","note":}}'
  const levels = Math.floor((BYTES - empty.length) / 2)
  return empty.replace('"note":', `"note":${'['.repeat(levels)}${']'.repeat(levels)}`)
}

function largeValid(): string {
  return JSON.stringify({
    autofill: false,
    link: {
      url: 'https://example.com/',
      title: 't'.repeat(512),
      description: 'd'.repeat(2048),
      note: 'n'.repeat(4096),
      tags: Array.from({ length: 50 }, (_, i) => `tag-${i}`),
      pixels: Array.from({ length: 50 }, (_, i) => ({ platform: 'ga', value: `UA-${i}` })),
      extraOptionsGeolocations: [...COUNTRY_CODES].map((value) => ({ url: `https://example.com/${'g'.repeat(150)}`, value })),
      extraOptionsLinkRotator: Array.from({ length: 20 }, (_, i) => ({ url: `https://example.com/${i}`, value: 5 })),
    },
  })
}

const cases: [string, string][] = [
  ...WORST_CASES.map(({ field, element }): [string, string] => [
    `${field}: [${JSON.stringify(element)}, …]`,
    worstCaseBody(field, element, { url: 'https://example.com/' }, BYTES),
  ]),
  ['nested arrays as deep as the size allows', deepest()],
  ['strings with NUL', manyStrings('\u0000')],
  ['strings with a lone surrogate', manyStrings('\ud800')],
  ['a large valid link (201, stored each time)', largeValid()],
]

const { database } = await openTestDatabase({ teardown: () => {} })
const app = await buildApp({ config: testConfig(), database, logger: false, autofill: testAutofill() })
await app.ready()
const token = await createWorkspaceToken(database.prisma, { workspace: 'bench', defaultDomain: 'go.bench.test' })
const validate = compileBodyValidator(CreateLinkBody)

/**
 * The route's validation alone: what a request of this body costs the event loop before any database work,
 * in wall-clock time and in CPU time (which a busy machine's other processes do not inflate).
 */
function validateAlone(payload: string): { wall: number; cpu: number } {
  const cpu = process.cpuUsage()
  const started = performance.now()
  const body = JSON.parse(payload)
  const { problems, total } = clientDataProblems(body)
  if (total > 0) validationFailed(problems, total)
  else if (!validate(body)) validationFailed(fieldErrors(validate.errors ?? []))
  const wall = performance.now() - started
  const used = process.cpuUsage(cpu)
  return { wall, cpu: (used.user + used.system) / 1000 }
}

async function request(payload: string): Promise<{ ms: number; status: number; errors: number }> {
  const started = performance.now()
  const response = await app.inject({
    method: 'POST',
    url: '/v1/links/create',
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
    payload,
  })
  const ms = performance.now() - started
  return { ms, status: response.statusCode, errors: response.statusCode === 400 ? response.json().errors.length : 0 }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const ms = (value: number) => value.toFixed(2).padStart(9)

// Warm-up: every case a few times first, so that no case pays for the compilation of code the others share.
for (let run = 0; run < WARM_UP; run++) {
  for (const [, payload] of cases) {
    validateAlone(payload)
    await request(payload)
  }
}

console.log(`POST /v1/links/create, bodies of at most ${BYTES} bytes, ${RUNS} runs per case after ${WARM_UP} warm-up rounds`)
console.log(`${availableParallelism()} CPUs, load average ${loadavg().map((load) => load.toFixed(2)).join(' ')}`)
console.log(
  'case'.padEnd(48),
  'bytes'.padStart(6),
  'answer'.padStart(7),
  'errors'.padStart(7),
  '| validation alone: max'.padStart(23),
  'median'.padStart(9),
  'max CPU'.padStart(9),
  '| whole request: max'.padStart(20),
  'median'.padStart(9),
)
let slowest = 0
let slowestCpu = 0
for (const [label, payload] of cases) {
  const alone: number[] = []
  const aloneCpu: number[] = []
  const whole: number[] = []
  let last = { status: 0, errors: 0 }
  for (let run = 0; run < RUNS; run++) {
    const { wall, cpu } = validateAlone(payload)
    alone.push(wall)
    aloneCpu.push(cpu)
    const answer = await request(payload)
    whole.push(answer.ms)
    last = answer
  }
  slowest = Math.max(slowest, ...alone)
  slowestCpu = Math.max(slowestCpu, ...aloneCpu)
  console.log(
    label.padEnd(48),
    String(payload.length).padStart(6),
    String(last.status).padStart(7),
    String(last.errors).padStart(7),
    `| ${ms(Math.max(...alone))}`.padStart(23),
    ms(median(alone)),
    ms(Math.max(...aloneCpu)),
    `| ${ms(Math.max(...whole))}`.padStart(20),
    ms(median(whole)),
  )
}
console.log(
  `slowest validation of all cases: ${slowest.toFixed(2)} ms wall-clock, ${slowestCpu.toFixed(2)} ms of CPU (target: under 20 ms)`,
)
await app.close()
await database.close()
