/**
 * The database store of Idempotency-Key (the "IdempotencyKey" table), used when REDIS_URL is unset: on the
 * PostgreSQL server every instance shares, or in the embedded database. Plain SQL through the driver, one
 * statement per step:
 *
 * - claim: one INSERT … ON CONFLICT DO UPDATE … WHERE the row has expired: it inserts a free key, takes over an
 *   expired one (an answer past its 24 h, or a claim past its lease), and leaves a live one alone, atomically
 *   (the primary key serialises two requests with one key: the second waits for the first's insert, then finds
 *   the row live). When it took nothing, the live row is read to tell a replay from a request in progress;
 * - complete and release change the row only while it still holds this request's claim token.
 *
 * Expired rows are taken over on access; the others are deleted by a sweep that a claim starts at most every
 * SWEEP_INTERVAL_MS, in the background, in batches. Times come from the service clock (tests drive it).
 */
import { randomUUID } from 'node:crypto'
import type { Database } from '../db/database.js'
import {
  ANSWER_TTL_MS,
  CLAIM_ATTEMPTS,
  CLAIM_LEASE_MS,
  outcomeOf,
  type Claim,
  type ClaimOutcome,
  type IdempotencyScope,
  type IdempotencyStore,
  type StoredAnswer,
  type StoreTimes,
} from './idempotency-store.js'

/** How often an instance deletes expired keys (a claim starts it), and how many rows a statement deletes. */
export const SWEEP_INTERVAL_MS = 10 * 60 * 1000
const SWEEP_BATCH = 1000

const CLAIM_SQL = `
INSERT INTO "IdempotencyKey" ("workspaceId", "key", "fingerprint", "claimToken", "expiresAt")
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT ("workspaceId", "key") DO UPDATE SET
  "fingerprint" = EXCLUDED."fingerprint", "claimToken" = EXCLUDED."claimToken", "expiresAt" = EXCLUDED."expiresAt",
  "status" = NULL, "headers" = NULL, "body" = NULL, "createdAt" = CURRENT_TIMESTAMP
WHERE "IdempotencyKey"."expiresAt" <= $6
RETURNING 1 AS claimed`

const READ_SQL = `
SELECT "fingerprint", "status", "headers", "body" FROM "IdempotencyKey"
WHERE "workspaceId" = $1 AND "key" = $2 AND "expiresAt" > $3`

const COMPLETE_SQL = `
UPDATE "IdempotencyKey" SET "claimToken" = NULL, "status" = $4, "headers" = $5::jsonb, "body" = $6, "expiresAt" = $7
WHERE "workspaceId" = $1 AND "key" = $2 AND "claimToken" = $3
RETURNING 1 AS stored`

const RELEASE_SQL = `
DELETE FROM "IdempotencyKey" WHERE "workspaceId" = $1 AND "key" = $2 AND "claimToken" = $3`

const SWEEP_SQL = `
DELETE FROM "IdempotencyKey" WHERE ("workspaceId", "key") IN (
  SELECT "workspaceId", "key" FROM "IdempotencyKey" WHERE "expiresAt" <= $1 LIMIT ${SWEEP_BATCH}
) RETURNING 1 AS deleted`

interface KeyRow {
  fingerprint: string
  status: number | null
  /** jsonb: parsed by both drivers. */
  headers: Record<string, string> | null
  body: string | null
}

export class PostgresIdempotencyStore implements IdempotencyStore {
  private readonly answerTtlMs: number
  private readonly leaseMs: number
  private lastSweep = -Infinity
  private sweeping: Promise<void> | null = null

  constructor(
    private readonly database: Pick<Database, 'sql'>,
    private readonly options: StoreTimes & { onSweepError?: (error: unknown) => void } = {},
  ) {
    this.answerTtlMs = options.answerTtlMs ?? ANSWER_TTL_MS
    this.leaseMs = options.leaseMs ?? CLAIM_LEASE_MS
  }

  async claim(scope: IdempotencyScope, fingerprint: string, now: number): Promise<ClaimOutcome> {
    this.sweepWhenDue(now)
    const claim: Claim = { scope, fingerprint, token: randomUUID() }
    const at = new Date(now)
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const claimed = await this.database.sql(CLAIM_SQL, [scope.workspaceId, scope.key, fingerprint, claim.token, new Date(now + this.leaseMs), at])
      if (claimed.length > 0) return { kind: 'claimed', claim }
      const [row] = await this.database.sql<KeyRow>(READ_SQL, [scope.workspaceId, scope.key, at])
      // Deleted (released, or swept) between the two statements: the key is free again.
      if (!row) continue
      const answer = row.status === null ? null : { status: row.status, headers: row.headers ?? {}, body: row.body ?? '' }
      return outcomeOf({ fingerprint: row.fingerprint, answer }, fingerprint)
    }
    return { kind: 'in-progress' }
  }

  async complete(claim: Claim, answer: StoredAnswer, now: number): Promise<boolean> {
    const { workspaceId, key } = claim.scope
    const stored = await this.database.sql(COMPLETE_SQL, [
      workspaceId, key, claim.token, answer.status, JSON.stringify(answer.headers), answer.body, new Date(now + this.answerTtlMs),
    ])
    return stored.length > 0
  }

  async release(claim: Claim): Promise<void> {
    await this.database.sql(RELEASE_SQL, [claim.scope.workspaceId, claim.scope.key, claim.token])
  }

  /** Starts a sweep when the last one is SWEEP_INTERVAL_MS old; the request does not wait for it. */
  private sweepWhenDue(now: number): void {
    if (this.sweeping || now - this.lastSweep < SWEEP_INTERVAL_MS) return
    this.lastSweep = now
    this.sweeping = this.sweep(now)
      .catch((error: unknown) => this.options.onSweepError?.(error))
      .finally(() => {
        this.sweeping = null
      })
  }

  /** Deletes the keys expired at `now`, a batch per statement so that no statement holds many row locks. */
  async sweep(now: number): Promise<void> {
    const before = new Date(now)
    while ((await this.database.sql(SWEEP_SQL, [before])).length === SWEEP_BATCH);
  }

  async close(): Promise<void> {
    await this.sweeping
  }
}
