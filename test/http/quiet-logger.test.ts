/** The request logger of the visitor routes and the probes: nothing below warn, and a stricter LOG_LEVEL still rules. */
import pino from 'pino'
import { Writable } from 'node:stream'
import t from 'tap'
import type { FastifyBaseLogger } from 'fastify'
import { quietChildLogger } from '../../src/plugins/quiet-logger.js'

function loggerAt(level: string) {
  const lines: { level: number; msg: string }[] = []
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()))
      done()
    },
  })
  const parent = pino({ level }, stream) as unknown as FastifyBaseLogger
  const request = quietChildLogger(parent, { reqId: 'visit-1' }, {}) as FastifyBaseLogger & { isLevelEnabled(level: string): boolean }
  return { lines, request }
}

const settle = () => new Promise((resolve) => setImmediate(resolve))

t.test('at info: warnings and errors are written, bound to the request; info and below are not', async (t) => {
  const { lines, request } = loggerAt('info')
  request.info('a visit')
  request.warn('a warning')
  request.error('an error')
  await settle()
  t.same(lines.map((line) => [line.level, line.msg, (line as { reqId?: string }).reqId]), [[40, 'a warning', 'visit-1'], [50, 'an error', 'visit-1']])
  t.ok(request.isLevelEnabled('warn'))
  t.notOk(request.isLevelEnabled('info'))
})

for (const [level, written] of [['error', ['an error']], ['silent', []]] as const) {
  t.test(`LOG_LEVEL=${level}: the visitor routes write no more than that level lets through`, async (t) => {
    const { lines, request } = loggerAt(level)
    request.warn('a warning')
    request.error('an error')
    await settle()
    t.same(lines.map((line) => line.msg), written)
    t.notOk(request.isLevelEnabled('warn'))
  })
}
