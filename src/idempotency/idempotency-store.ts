/**
 * Idempotency-Key (draft-ietf-httpapi-idempotency-key-header): what a store keeps per workspace and key, and
 * what it answers. Two stores: Redis when REDIS_URL is set (redis-store.ts), else the database
 * (postgres-store.ts); both shared by every instance, so a key holds across them.
 *
 * A key goes through two states: claimed by a request in progress (for a lease, so that an instance that dies
 * mid-request does not block the key for ever), then holding that request's answer for 24 hours. A claim is
 * taken atomically: of two requests with one key, exactly one gets it.
 */

/** How long an answer is replayed (the draft leaves it to the server; 24 h is the and Stripe's). */
export const ANSWER_TTL_MS = 24 * 60 * 60 * 1000

/**
 * How long a claim holds without an answer. Longer than any request takes: a bulk create of 100 links whose
 * pages are slow takes 13 rounds of AUTOFILL_TIMEOUT_MS (3 s) plus its writes, and the server closes a
 * connection idle for 60 s. Past the lease a retry runs the request again (the instance that held it is
 * taken to have died), so the lease is also the longest a crashed instance blocks a key.
 */
export const CLAIM_LEASE_MS = 2 * 60 * 1000

export interface IdempotencyScope {
  workspaceId: number
  /** The key as the client sent it, without the quotes of its sf-string form. */
  key: string
}

/** The part of an answer that is replayed (src/idempotency/replay.ts decides which). */
export interface StoredAnswer {
  status: number
  /** Lower-case names. */
  headers: Record<string, string>
  /** The body exactly as it was sent. */
  body: string
}

/** A request's hold on its key, until it stores its answer or releases the key. */
export interface Claim {
  scope: IdempotencyScope
  fingerprint: string
  /** Tells this claim from a later one on the same key (after the lease ended). */
  token: string
}

export type ClaimOutcome =
  /** The key was free (or its lease or answer had expired): the request runs, holding the claim. */
  | { kind: 'claimed'; claim: Claim }
  /** The same request was answered before: its answer, to send again. */
  | { kind: 'answered'; answer: StoredAnswer }
  /** The same request is being served right now. */
  | { kind: 'in-progress' }
  /** The key belongs to a different request (another body or operation), in progress or answered. */
  | { kind: 'mismatch' }

export interface IdempotencyStore {
  /** Takes the key for this request, or says why not (`now`: the service clock, in ms). */
  claim(scope: IdempotencyScope, fingerprint: string, now: number): Promise<ClaimOutcome>
  /** Stores the claim's answer for ANSWER_TTL_MS; false when the claim was no longer held (its lease ended). */
  complete(claim: Claim, answer: StoredAnswer, now: number): Promise<boolean>
  /** Frees the key without an answer (the request failed in a way a retry should run again). */
  release(claim: Claim): Promise<void>
  close(): Promise<void>
}

export interface StoreTimes {
  /** ANSWER_TTL_MS unless a test shortens it. */
  answerTtlMs?: number
  /** CLAIM_LEASE_MS unless a test shortens it. */
  leaseMs?: number
}

/** What a key found already taken means for a request with `fingerprint`. */
export function outcomeOf(
  existing: { fingerprint: string; answer: StoredAnswer | null },
  fingerprint: string,
): Exclude<ClaimOutcome, { kind: 'claimed' }> {
  // A different request is refused whether or not the first is finished: the key is spent on it.
  if (existing.fingerprint !== fingerprint) return { kind: 'mismatch' }
  return existing.answer ? { kind: 'answered', answer: existing.answer } : { kind: 'in-progress' }
}

/** Tries a claim that can lose a race with an expiry (the key vanished between two reads) a few times. */
export const CLAIM_ATTEMPTS = 3
