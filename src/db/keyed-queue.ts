/**
 * Work on one key done one at a time, in arrival order; work on different keys side by side.
 *
 * Used for the writes of one link: PostgreSQL serialises them anyway (the row lock), but a writer waiting
 * for a row lock holds a pooled connection while it waits, and a few hundred writers of one link would hold
 * the whole pool and starve every other request. Queued here, they wait without a connection: at most one
 * connection per link and instance is taken, and the row lock still orders the instances among themselves.
 */
import { databaseBusy } from '../errors/app-error.js'

export class KeyedQueue<K> {
  /** The last work queued per key (settled or not); removed once it settles and nothing follows it. */
  private readonly tails = new Map<K, Promise<unknown>>()

  /**
   * Runs `work` once everything queued before it on `key` has settled. Work whose turn comes more than
   * `maxWaitMs` after it was queued is not run: it gets a 503 (the queue is longer than it can drain in time).
   */
  run<T>(key: K, maxWaitMs: number, work: () => Promise<T>): Promise<T> {
    const queuedAt = performance.now()
    const turn = () => {
      if (performance.now() - queuedAt > maxWaitMs) throw databaseBusy()
      return work()
    }
    const previous = this.tails.get(key)
    const result = previous ? previous.then(turn, turn) : turn()
    const tail = result.then(
      () => undefined,
      () => undefined,
    )
    this.tails.set(key, tail)
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key)
    })
    return result
  }

  /** Keys with work queued or running (tests). */
  get size(): number {
    return this.tails.size
  }
}
