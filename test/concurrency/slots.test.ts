/** Slots (src/concurrency/slots.ts): places given in order, a bounded line, leaving it by abort or after a wait. */
import t from 'tap'
import { Slots } from '../../src/concurrency/slots.js'

t.test('places go to the line in order; beyond the line, none at once', async (t) => {
  const slots = new Slots(1, 2)
  t.equal(await slots.take(), true)
  const order: string[] = []
  const a = slots.take().then((admitted) => order.push(`a ${admitted}`))
  const b = slots.take().then((admitted) => order.push(`b ${admitted}`))
  t.equal(await slots.take(), false, 'the line is full')
  t.same(slots.counts, { running: 1, waiting: 2 })
  slots.giveBack()
  await a
  slots.giveBack()
  await b
  t.same(order, ['a true', 'b true'])
  slots.giveBack()
  t.same(slots.counts, { running: 0, waiting: 0 })
})

t.test('a waiter that aborts or waits too long leaves the line without a place', async (t) => {
  const slots = new Slots(1, 2)
  await slots.take()
  const gone = new AbortController()
  const leaving = slots.take({ signal: gone.signal })
  const timing = slots.take({ maxWaitMs: 50 })
  gone.abort()
  t.equal(await leaving, false)
  t.equal(await timing, false)
  t.same(slots.counts, { running: 1, waiting: 0 })
  t.equal(await slots.take({ signal: gone.signal }), false, 'already aborted: not even tried')
  slots.giveBack()
  t.same(slots.counts, { running: 0, waiting: 0 }, 'the place is free, not given to those who left')
})
