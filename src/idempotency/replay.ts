/**
 * Which answers are kept for a key and what of them is sent again.
 *
 * Kept: the answers that are final for this request, whatever the attempt: successes and the client errors
 * the request itself causes (400 of the link rules, 403 domain refused, 409 slug taken). Such an answer
 * would be the same on a retry, or worse (a retry of a create that succeeded would make a second link), so the
 * retry gets it again.
 *
 * Not kept (the key is released, and a retry really runs again): 5xx (the database or Redis was down or busy,
 * a fault of ours), 429 (the quota is used up now, not for ever), 401 (the token, not the request; and no
 * workspace is known), 408: they are about the moment, not about the request.
 *
 * Headers sent again: those that describe the answer (Content-Type, Location, X-Autofill). Not the quota
 * headers: a replay takes no quota, and they say where the quota stands now, for this request (the route's
 * onSend sets them afresh). Not X-Request-Id: it names this request in the logs, and every request has its own.
 * A replay adds `Idempotent-Replayed: true` (Stripe's name; the draft names none), so a client can tell.
 */
import type { FastifyReply } from 'fastify'
import type { StoredAnswer } from './idempotency-store.js'

export const REPLAYED_HEADER = 'idempotent-replayed'

const REPLAYED_HEADERS = ['content-type', 'location', 'x-autofill'] as const

const TRANSIENT_CLIENT_ERRORS = new Set([401, 408, 429])

/** Whether an answer with this status is final for the request (kept and replayed). */
export const isFinalAnswer = (status: number) => status < 500 && !TRANSIENT_CLIENT_ERRORS.has(status)

/** The answer to keep, or undefined when it must not be kept (not final, or a body that is not text). */
export function answerToKeep(reply: FastifyReply, payload: unknown): StoredAnswer | undefined {
  if (!isFinalAnswer(reply.statusCode)) return undefined
  // The routes' answers are serialised JSON; anything else (a stream) is not kept rather than kept wrong.
  if (typeof payload !== 'string') return undefined
  const headers: Record<string, string> = {}
  for (const name of REPLAYED_HEADERS) {
    const value = reply.getHeader(name)
    if (value !== undefined) headers[name] = String(value)
  }
  return { status: reply.statusCode, headers, body: payload }
}

/** Sends a kept answer again: its status, headers and body bytes, marked as a replay. */
export function sendAnswer(reply: FastifyReply, answer: StoredAnswer): FastifyReply {
  // A string body with a JSON Content-Type is sent as it is: Fastify does not serialise it again.
  return reply.code(answer.status).headers(answer.headers).header(REPLAYED_HEADER, 'true').send(answer.body)
}
