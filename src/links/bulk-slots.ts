/**
 * How many bulk creates one instance works on at once. A bulk create of 100 links holds its parsed body, the
 * checked links, a statement of some 3,000 parameters and then 100 records until it is answered: with fifty at
 * once the process grew past 400 MB (`npm run bench`), while the database, which writes one batch at a time per
 * connection anyway, was no faster for it. So at most `atOnce` are worked on; the others wait **before their body
 * is read** (it stays in the connection's socket buffer, not in the process), in order, up to `waiting` of them
 * for at most `maxWaitMs` each. A request beyond that is answered at once 503 `unavailable` with Retry-After, as
 * an overloaded instance answers (src/plugins/overload.ts). A waiting request whose client goes away leaves the
 * line.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Slots } from '../concurrency/slots.js'
import { AppError, retryShortly, RETRY_AFTER_UNAVAILABLE_SECONDS } from '../errors/app-error.js'

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

/** An onRequest hook that takes a place for the request, given back once its response is done or its connection closes. */
export function bulkSlotHook(options: BulkSlotOptions = {}) {
  const slots = new Slots(options.atOnce ?? 4, options.waiting ?? 200)
  const maxWaitMs = options.maxWaitMs ?? 10_000
  const hook = async function takeBulkSlot(_request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const response = reply.raw
    const gone = new AbortController()
    const leave = () => gone.abort()
    response.once('close', leave)
    const admitted = await slots.take({ signal: gone.signal, maxWaitMs })
    response.off('close', leave)
    if (admitted && gone.signal.aborted) slots.giveBack() // the connection closed as the place came: nobody to work for
    if (!admitted || gone.signal.aborted) throw bulkBusy()
    response.once('close', () => slots.giveBack())
  }
  return Object.assign(hook, { slots })
}
