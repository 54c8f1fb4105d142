/**
 * Latency under a steady load: requests sent at evenly spaced instants (`rate` a second) over up to
 * `connections` keep-alive connections, each one's latency measured from the instant it was due, so a request
 * that waits behind a slow one counts its wait (no coordinated omission).
 *
 * autocannon's `overallRate` is no steady load: it gives each connection its share of a second, which the
 * connection sends back to back as soon as the second starts, then idles; and it adds synthetic samples for
 * every answer slower than 1 ms. Its p99 "at half rate" is the p99 of bursts at full speed.
 *
 * Due instants are checked every millisecond (a timer), so a request leaves at most about a millisecond late on
 * an idle machine, alike for every server measured.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Pool } from 'undici'

export interface SteadyRequest {
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE'
  path: string
  headers?: Record<string, string>
  body?: string
  /** The status the request should get; any other is counted in `unexpected`. */
  expect?: number
}

export interface SteadyResult {
  /** Answers a second, over the time from the first due instant to the last answer. */
  rps: number
  p50: number
  p99: number
  /** Answers by status. */
  statuses: Record<number, number>
  /** Answers whose status was not the one their request expects, by status. */
  unexpected: Record<number, number>
  /** Requests that got no answer (socket errors). */
  errors: number
}

const percentile = (sorted: Float64Array, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]

export async function steadyLoad(
  origin: string,
  options: { rate: number; seconds: number; connections: number; next: () => SteadyRequest },
): Promise<SteadyResult> {
  const pool = new Pool(origin, { connections: options.connections, pipelining: 1 })
  const total = Math.floor(options.rate * options.seconds)
  const interval = 1000 / options.rate
  const latencies = new Float64Array(total)
  const statuses: Record<number, number> = {}
  const unexpected: Record<number, number> = {}
  let errors = 0
  let answered = 0
  const pending: Promise<void>[] = []
  const send = async (due: number) => {
    const request = options.next()
    try {
      const response = await pool.request({ method: request.method ?? 'GET', path: request.path, headers: request.headers, body: request.body })
      await response.body.dump()
      latencies[answered++] = performance.now() - due
      statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1
      if (request.expect !== undefined && response.statusCode !== request.expect) {
        unexpected[response.statusCode] = (unexpected[response.statusCode] ?? 0) + 1
      }
    } catch {
      errors++
    }
  }
  const start = performance.now()
  for (let sent = 0; sent < total; ) {
    const now = performance.now()
    for (; sent < total && start + sent * interval <= now; sent++) pending.push(send(start + sent * interval))
    if (sent < total) await sleep(1)
  }
  await Promise.all(pending)
  const elapsed = (performance.now() - start) / 1000
  await pool.close()
  const sorted = latencies.subarray(0, answered).sort()
  return { rps: answered / elapsed, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), statuses, unexpected, errors }
}
