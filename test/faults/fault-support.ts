/** Shared by the fault tests: HTTP to a server process with every request bounded, and answers summed up. */

/** A request that takes longer than this hung: a 503 comes within the 3 s the service waits for its database. */
export const HANG_BOUND_MS = 10_000

export interface Answer {
  status: number
  headers: Headers
  body: Record<string, any>
  /** Set when no answer came: the request timed out or its connection failed. */
  error?: string
}

/** One request to the server on `port`, bounded by HANG_BOUND_MS; never throws. */
export async function ask(port: number, path: string, init: RequestInit = {}): Promise<Answer> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      ...init,
      redirect: 'manual',
      signal: AbortSignal.timeout(HANG_BOUND_MS),
    })
    const text = await response.text()
    let body: Record<string, any> = {}
    try {
      body = text ? JSON.parse(text) : {}
    } catch {
      body = { text }
    }
    return { status: response.status, headers: response.headers, body }
  } catch (error) {
    return { status: 0, headers: new Headers(), body: {}, error: String((error as Error).cause ?? error) }
  }
}

/** POST /v1/links/create with `link`, autofill off (no page to fetch). */
export function createLink(port: number, token: string, link: Record<string, unknown>): Promise<Answer> {
  return ask(port, '/v1/links/create', {
    method: 'POST',
    headers: { 'api-authorization': token, 'content-type': 'application/json' },
    body: JSON.stringify({ link, autofill: false }),
  })
}

/** Runs `work(i)` for i in [0, count) with at most `concurrency` at a time; the results in order. */
export async function pool<T>(count: number, concurrency: number, work: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count)
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++
        results[i] = await work(i)
      }
    }),
  )
  return results
}

/** { 201: 40, 503: 12 } */
export function countStatuses(answers: Answer[]): Record<number, number> {
  const counts: Record<number, number> = {}
  for (const answer of answers) counts[answer.status] = (counts[answer.status] ?? 0) + 1
  return counts
}
