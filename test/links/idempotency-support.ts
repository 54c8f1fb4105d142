/** Shared by the Idempotency-Key tests: requests with a key, a page that autofill waits on, what the stores hold. */
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { Redis } from 'ioredis'
import type { Database } from '../../src/db/database.js'
import { answerWhenReleased, page, startPageServer, type PageServer } from '../autofill/page-server.js'
import { waitFor } from '../support/polling.js'

export const CREATE = '/v1/links/create'
export const BULK = '/v1/links/bulk'

/** A POST with a token and, unless `key` is undefined, an Idempotency-Key; `body` sent as given when a string. */
export function post(app: FastifyInstance, token: string, url: string, body: unknown, key?: string, headers: Record<string, string> = {}) {
  return app.inject({
    method: 'POST',
    url,
    headers: {
      'api-authorization': token,
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
      ...headers,
    },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  })
}

/** The headers a replay must repeat, and the marker it adds. */
export function answerHeaders(response: LightMyRequestResponse) {
  const header = (name: string) => response.headers[name] as string | undefined
  return { contentType: header('content-type'), location: header('location'), autofill: header('x-autofill') }
}

export const replayed = (response: LightMyRequestResponse) => response.headers['idempotent-replayed']

/**
 * A destination page that autofill fetches and that answers only when the test says so: a create with
 * autofill on it stays in progress (its key claimed) until `release()`.
 */
export async function heldPage(t: { teardown(fn: () => unknown): void }) {
  const server: PageServer = await startPageServer(t)
  const { handler, release } = answerWhenReleased(t, page('<!doctype html><title>Held page</title><meta name="description" content="It waited">'))
  server.route('/held', handler)
  return {
    url: server.url('/held'),
    /** Resolves once autofill is waiting for the page (the request holds its key). */
    fetched: () => waitFor(() => server.requests('/held').length > 0),
    release,
  }
}

/** The database store's rows of a workspace (or of every workspace). */
export async function keyRows(database: Database, workspaceId?: number) {
  return database.sql<{ key: string; status: number | null; claimToken: string | null; expiresAt: Date }>(
    `SELECT "key", "status", "claimToken", "expiresAt" FROM "IdempotencyKey"${workspaceId === undefined ? '' : ' WHERE "workspaceId" = $1'} ORDER BY "key"`,
    workspaceId === undefined ? [] : [workspaceId],
  )
}

/** The Redis store's value and remaining lifetime (ms) for a key. */
export async function redisKey(redisUrl: string, keyPrefix: string, workspaceId: number, key: string) {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
  try {
    const name = `${keyPrefix}idem:{ws:${workspaceId}}:${key}`
    const [value, ttl] = await Promise.all([redis.get(name), redis.pttl(name)])
    return { value: value === null ? null : (JSON.parse(value) as Record<string, unknown>), ttl }
  } finally {
    redis.disconnect()
  }
}
