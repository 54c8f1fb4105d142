import t from 'tap'
import { OccasionalWarning } from '../../src/logging/occasional-warning.js'

t.test('the first occurrence is written, the next within the interval counted, and the count goes with the next line', async (t) => {
  let now = 1_000_000
  const warning = new OccasionalWarning(60_000, () => now)
  t.equal(warning.occurred(), 1, 'the first occurrence is due at once')
  now += 1_000
  t.equal(warning.occurred(), null)
  now += 58_999
  t.equal(warning.occurred(), null, 'a millisecond before the interval ends: still counted only')
  now += 1
  t.equal(warning.occurred(), 3, 'a minute after the last line: due, with the two held back and this one')
  t.equal(warning.occurred(), null)
})

t.test('reset makes the next occurrence due at once, counted afresh', async (t) => {
  let now = 0
  const warning = new OccasionalWarning(60_000, () => now)
  t.equal(warning.occurred(), 1)
  t.equal(warning.occurred(), null)
  warning.reset()
  now += 10
  t.equal(warning.occurred(), 1, 'the one held back before the reset is not counted again')
  t.equal(warning.occurred(), null)
})
