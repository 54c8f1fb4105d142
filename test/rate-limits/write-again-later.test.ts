/**
 * writeAgainLater (src/redis/redis-client.ts): a write Redis must get after all (a quota refund, the release of a
 * key's claim) is sent again every `everyMs` for `forMs`; with `ready`, the window does not run out while Redis
 * is not ready, since Redis frozen for longer still runs on waking what it had been sent before.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { waitFor } from '../support/polling.js'
import t from 'tap'
import { writeAgainLater } from '../../src/redis/redis-client.js'

/** A write that fails while Redis is not ready, as the client's commands do (no offline queue). */
function fakeRedis() {
  const state = { ready: false, writes: 0, written: 0, gaveUp: 0 }
  const write = async () => {
    state.writes++
    if (!state.ready) throw new Error('Stream isn\'t writeable and enableOfflineQueue options is false')
    state.written++
  }
  return { state, write, giveUp: () => void state.gaveUp++ }
}

t.test('without `ready`, it gives up once its window has passed, Redis away or not', async (t) => {
  const redis = fakeRedis()
  writeAgainLater(redis.write, new Error('first try failed'), { everyMs: 20, forMs: 100, giveUp: redis.giveUp })
  await sleep(300)
  redis.state.ready = true
  await sleep(100)
  t.same([redis.state.written, redis.state.gaveUp], [0, 1])
})

t.test('with `ready`, the window starts once Redis is ready again: the write gets there after a long outage', async (t) => {
  const redis = fakeRedis()
  writeAgainLater(redis.write, new Error('first try failed'), { everyMs: 20, forMs: 100, giveUp: redis.giveUp, ready: () => redis.state.ready })
  await sleep(300)
  t.equal(redis.state.gaveUp, 0, 'still trying after three times its window')
  redis.state.ready = true
  await waitFor(() => redis.state.written > 0, 2000, 10)
  t.same([redis.state.written, redis.state.gaveUp], [1, 0], 'written once Redis is ready')
  const tries = redis.state.writes
  await sleep(100)
  t.equal(redis.state.writes, tries, 'and not sent again')
})
