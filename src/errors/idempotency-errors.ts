/**
 * The errors of Idempotency-Key (src/plugins/idempotency.ts), as the draft names them: 400 for a key that is
 * not one, 409 while the first request with the key is still being served, 422 for a key reused with another
 * request. Each a named constructor of the one AppError type, rendered as problem+json like every other.
 */
import { AppError, retryShortly, validationFailed } from './app-error.js'

/** The header, named like a field (a JSON pointer into the request's headers), as the contract's 400s name fields. */
export const IDEMPOTENCY_KEY_FIELD = '/headers/Idempotency-Key'

export const invalidIdempotencyKey = (message: string) => validationFailed([{ path: IDEMPOTENCY_KEY_FIELD, message }])

/** Seconds a client waits before asking again for the answer of a request still in progress. */
export const IN_PROGRESS_RETRY_AFTER_SECONDS = 1

export const idempotencyKeyInUse = () =>
  new AppError(
    409,
    'idempotency_key_in_use',
    'A request with this Idempotency-Key is still being served; send it again in a moment to get its answer',
    undefined,
    { 'retry-after': String(IN_PROGRESS_RETRY_AFTER_SECONDS) },
  )

export const idempotencyKeyReused = () =>
  new AppError(
    422,
    'idempotency_key_reused',
    'This Idempotency-Key was used in the last 24 hours for a request with a different body or operation; ' +
      'send a new key with a new request',
  )

/**
 * A bulk create whose statement reached the database and whose answer was lost: its links may be stored. With an
 * Idempotency-Key each link is stored with its key row or not at all, so the key's retry answers the stored ones
 * and creates the others; without one, only a look tells.
 */
export const bulkOutcomeUnknown = (keyed: boolean) =>
  new AppError(
    503,
    'unavailable',
    'The database failed while the links were being stored (its connection broke, or it refused a statement), and ' +
      'the service could not learn which were: ' +
      (keyed
        ? 'send the request again with the same Idempotency-Key, which answers the links that were stored and creates the others'
        : 'look them up before creating them again (links with an id that were stored answer 409 slug_taken); ' +
          'an Idempotency-Key makes such a retry safe'),
    undefined,
    retryShortly,
  )

/**
 * A single create with an Idempotency-Key whose write's outcome is unknown (writeOutcomeUnknown for one without):
 * its retry with the key is the safe way to learn it.
 */
export const keyedCreateOutcomeUnknown = () =>
  new AppError(
    503,
    'unavailable',
    'The connection to the database broke while the link was being stored, and the service could not learn whether ' +
      'it was: send the request again with the same Idempotency-Key, which answers the link if it was stored and creates it otherwise',
    undefined,
    retryShortly,
  )
