/** The per-link writer queue (src/db/keyed-queue.ts): one at a time per key, in order, bounded, and leaves nothing behind. */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { KeyedQueue } from '../../src/db/keyed-queue.js'
import { AppError } from '../../src/errors/app-error.js'

t.test('work on one key runs one at a time, in arrival order, even when some fails', async (t) => {
  const queue = new KeyedQueue<number>()
  const events: string[] = []
  let running = 0
  const job = (name: string, fail = false) => async () => {
    running++
    t.equal(running, 1, `${name} runs alone`)
    events.push(`start ${name}`)
    await sleep(5)
    events.push(`end ${name}`)
    running--
    if (fail) throw new Error(name)
    return name
  }
  const results = await Promise.allSettled([
    queue.run(1, 60_000, job('a')),
    queue.run(1, 60_000, job('b', true)),
    queue.run(1, 60_000, job('c')),
  ])
  t.same(events, ['start a', 'end a', 'start b', 'end b', 'start c', 'end c'])
  t.same(results.map((result) => result.status), ['fulfilled', 'rejected', 'fulfilled'])
  t.equal(queue.size, 0, 'nothing is kept once the queue has drained')
})

t.test('work on different keys runs side by side', async (t) => {
  const queue = new KeyedQueue<number>()
  let running = 0
  let most = 0
  const job = async () => {
    most = Math.max(most, ++running)
    await sleep(5)
    running--
  }
  await Promise.all([queue.run(1, 60_000, job), queue.run(2, 60_000, job), queue.run(3, 60_000, job)])
  t.equal(most, 3)
})

t.test('work whose turn comes later than its bound is not run: a 503', async (t) => {
  const queue = new KeyedQueue<string>()
  let ran = false
  const first = queue.run('link', 60_000, () => sleep(50))
  const late = queue.run('link', 10, async () => {
    ran = true
  })
  await first
  const error = await late.catch((caught: unknown) => caught)
  t.ok(error instanceof AppError)
  t.match(error, { status: 503, code: 'unavailable', headers: { 'retry-after': /^\d+$/ } })
  t.notOk(ran)
  t.equal(queue.size, 0)
})
