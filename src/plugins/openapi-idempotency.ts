/**
 * How an operation that honours Idempotency-Key (src/plugins/idempotency.ts) documents it: the optional
 * request header, its 409 and 422 answers, the replay header on the answers that can be replays, and a
 * paragraph of the operation's description. The route's own documentation is written first; this adds to it.
 */
import { Type, type TSchema } from '@sinclair/typebox'
import { StringEnum } from '../../schemas/enum.js'
import { Problem } from '../../schemas/problem.js'
import type { AppError } from '../errors/app-error.js'
import { IDEMPOTENCY_KEY_FIELD, idempotencyKeyInUse, idempotencyKeyReused } from '../errors/idempotency-errors.js'
import { MAX_KEY_LENGTH } from '../idempotency/idempotency-key.js'
import { PROBLEM_MEDIA_TYPE } from './openapi-responses.js'

/** The request header, as a header parameter (the check itself is src/idempotency/idempotency-key.ts). */
export const IdempotencyKeyHeaders = Type.Object({
  'Idempotency-Key': Type.Optional(
    Type.String({
      // Exactly what parseIdempotencyKey takes: bare, 1 to MAX_KEY_LENGTH printable ASCII characters not starting
      // with a quote; or quoted, as many characters where `\"` and `\\` count one each.
      minLength: 1,
      maxLength: 2 * MAX_KEY_LENGTH + 2,
      pattern: `^(?:[\\x21\\x23-\\x7E][\\x20-\\x7E]{0,${MAX_KEY_LENGTH - 1}}|"(?:[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\["\\\\]){1,${MAX_KEY_LENGTH}}")$`,
      description:
        `Makes the request safe to retry: 1 to ${MAX_KEY_LENGTH} printable ASCII characters chosen by the client ` +
        '(a UUID does), unique per request, per workspace. As a structured-field string (`"…"`, as the IETF ' +
        'draft writes it) or bare: both name the same key. The same key with the same body within 24 hours gets ' +
        'the first answer again (status, body, Location, X-Autofill, with `Idempotent-Replayed: true`) and creates ' +
        'nothing; while the first is still being served, 409 `idempotency_key_in_use`; with another body, 422 ' +
        '`idempotency_key_reused`. Answers 5xx, 429 and 401 are not kept: a retry runs again.',
      examples: ['"8e03978e-40d5-43e8-bc93-6894a57f9324"'],
    }),
  ),
})

const REPLAYED_HEADER = {
  'Idempotent-Replayed': StringEnum(['true'], {
    description: 'Present when this is the kept answer of an earlier request with the same Idempotency-Key',
  }),
}

interface DocumentedResponse {
  description: string
  headers?: Record<string, TSchema>
  content?: Record<string, { schema: unknown; examples?: Record<string, { value: unknown }> }>
}

/** The response for `status` with `error` among its examples (a new one when the route documents none). */
function withProblem(response: DocumentedResponse | undefined, error: AppError, when: string): DocumentedResponse {
  const examples = response?.content?.[PROBLEM_MEDIA_TYPE]?.examples ?? {}
  return {
    ...response,
    description: response ? `${response.description}; ${when}` : when,
    content: {
      [PROBLEM_MEDIA_TYPE]: { schema: Type.Ref(Problem), examples: { ...examples, [error.code]: { value: error.toProblem() } } },
    },
  }
}

/** A sentence for the operation's description. */
export const IDEMPOTENCY_KEY_NOTE =
  'With an `Idempotency-Key` header the request is safe to retry: see the header parameter.'

/** The route's responses with Idempotency-Key's answers added (before withQuotaHeaders, which they get too). */
export function withIdempotencyAnswers<T extends Record<number, object>>(routeResponses: T): T {
  const responses = { ...routeResponses } as Record<number, DocumentedResponse>
  for (const [status, response] of Object.entries(responses)) {
    // Final answers are kept and may be replays; 401, 429 and 5xx never are.
    const code = Number(status)
    if (code < 500 && code !== 401 && code !== 429) responses[code] = { ...response, headers: { ...response.headers, ...REPLAYED_HEADER } }
  }
  responses[400] = {
    ...responses[400],
    description:
      `${responses[400].description}; validation_failed naming ${IDEMPOTENCY_KEY_FIELD} for an Idempotency-Key that ` +
      `is not 1 to ${MAX_KEY_LENGTH} printable ASCII characters, or is sent twice`,
  }
  const inUse = withProblem(
    responses[409],
    idempotencyKeyInUse(),
    'idempotency_key_in_use: the first request with this Idempotency-Key is still being served; Retry-After says when to ask again',
  )
  const retryAfter = Type.Integer({ minimum: 1, description: 'With idempotency_key_in_use: seconds to wait before sending the request again' })
  responses[409] = { ...inUse, headers: { ...inUse.headers, 'Retry-After': retryAfter } }
  responses[422] = withProblem(
    undefined,
    idempotencyKeyReused(),
    'idempotency_key_reused: the Idempotency-Key was used in the last 24 hours with a different body (or operation)',
  )
  return responses as T
}
