/** The rate-limit headers of contract section 8, from where the windows stand. */
import { QUOTA_WINDOWS, type QuotaDecision, type QuotaLimits, type WindowUsage } from './quota-store.js'

/** The window with fewer requests remaining; on a tie, the one that frees later (so Reset matches Retry-After). */
export function tighterWindow(windows: WindowUsage[]): WindowUsage {
  return windows.reduce((tight, window) =>
    window.remaining < tight.remaining || (window.remaining === tight.remaining && window.resetSeconds > tight.resetSeconds)
      ? window
      : tight,
  )
}

const policyOf = (windows: { name: string; limit: number; seconds: number }[]) =>
  windows.map((window) => `"${window.name}";q=${window.limit};w=${window.seconds}`).join(', ')

/** `RateLimit-Policy`: the workspace's quotas, known whether or not the counters could be read. */
export const policyHeader = (limits: QuotaLimits) => policyOf(QUOTA_WINDOWS.map((window) => ({ ...window, limit: limits[window.name] })))

export function quotaHeaders(windows: WindowUsage[]): Record<string, string> {
  const tight = tighterWindow(windows)
  return {
    'ratelimit-policy': policyOf(windows),
    ratelimit: `"${tight.name}";r=${tight.remaining};t=${tight.resetSeconds}`,
    'x-ratelimit-limit': String(tight.limit),
    'x-ratelimit-remaining': String(tight.remaining),
    'x-ratelimit-reset': String(tight.resetSeconds),
  }
}

/** The full windows of a refused reservation, the one that frees last first: it sets Retry-After. */
export function exhaustedWindow(decision: QuotaDecision): WindowUsage {
  return tighterWindow(decision.windows.filter((window) => window.remaining === 0))
}

/** The windows once `slots` of a reservation's slots are given back. */
export function afterRefund(windows: WindowUsage[], slots = 1): WindowUsage[] {
  return windows.map((window) => {
    const used = Math.max(0, window.used - slots)
    return { ...window, used, remaining: Math.max(0, window.limit - used), resetSeconds: used === 0 ? 0 : window.resetSeconds }
  })
}
