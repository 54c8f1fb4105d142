/**
 * How many bulk creates one instance stores at once. Storing a batch of 100 links builds a statement of some
 * 3,000 parameters and then 100 records: with fifty at once the process grew past 220 MB (`npm run bench`), and
 * the database, which writes one batch at a time per connection anyway, was slower for it. So at most `atOnce`
 * are stored at once; the others wait, in order, up to `waiting` of them for at most `maxWaitMs` each; a batch
 * beyond is answered at once 503 `unavailable` with Retry-After, as an overloaded instance answers
 * (src/plugins/overload.ts).
 *
 * The place covers the storing only (createLinks' `inPlace`): it is taken once the links are checked, the quota
 * taken and their pages fetched, so a client still sending its body, a batch waiting for slow pages or one with
 * nothing to store holds none, and one workspace's slow pages do not keep the others' batches waiting. It is given
 * back when the storing ends, however it ends, even when the client has gone meanwhile (the statements still run
 * until then). A waiter whose client goes away leaves the line.
 *
 * Once the instance is closing nobody waits: the waiters are answered at once 503 (shutting down, another instance
 * takes the batch), and a batch that reaches its storing then is stored only if a place is free. A waiter admitted
 * late in the close, as the busy limit ends the statements of those before it, would otherwise store its links
 * after its connection was cut, unanswered.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Slots } from '../concurrency/slots.js'
import { AppError, retryShortly, RETRY_AFTER_UNAVAILABLE_SECONDS } from '../errors/app-error.js'
import { shuttingDown } from '../errors/http-errors.js'

export interface BulkSlotOptions {
  /** Bulk creates worked on at once (default 4). */
  atOnce?: number
  /** Bulk creates that may wait for a place (default 200). */
  waiting?: number
  /** The longest a bulk create waits for a place, in ms (default 10 s: well within a client's usual timeout). */
  maxWaitMs?: number
}

export const bulkBusy = () =>
  new AppError(
    503,
    'unavailable',
    `This instance is working on as many bulk creates as it takes; try again in ${RETRY_AFTER_UNAVAILABLE_SECONDS} s`,
    undefined,
    retryShortly,
  )

/**
 * Aborts once the request's response or its connection closes, whichever first (a response queued behind another
 * on a pipelined connection never emits 'close' of its own); `stop` removes the listeners.
 */
function closeSignal(request: FastifyRequest, reply: FastifyReply): { signal: AbortSignal; stop: () => void } {
  const closed = new AbortController()
  const emitters = [reply.raw, request.raw.socket]
  const stop = () => {
    for (const emitter of emitters) emitter.off('close', onClose)
  }
  const onClose = () => {
    stop()
    closed.abort()
  }
  if (reply.raw.destroyed || request.raw.socket.destroyed) closed.abort()
  else for (const emitter of emitters) emitter.once('close', onClose)
  return { signal: closed.signal, stop }
}

export function bulkSlots(options: BulkSlotOptions = {}) {
  const slots = new Slots(options.atOnce ?? 4, options.waiting ?? 200)
  const maxWaitMs = options.maxWaitMs ?? 10_000
  let closing = false
  return {
    /** The instance is closing (see above). */
    close(): void {
      closing = true
      slots.closeLine()
    },
    /** `work`'s answer, run in a place; 503 when none was given in time. */
    async run<T>(request: FastifyRequest, reply: FastifyReply, work: () => Promise<T>): Promise<T> {
      const closed = closeSignal(request, reply)
      const admitted = await slots.take({ signal: closed.signal, maxWaitMs })
      closed.stop()
      if (!admitted) throw closing ? shuttingDown() : bulkBusy()
      try {
        return await work()
      } finally {
        slots.giveBack()
      }
    },
  }
}
