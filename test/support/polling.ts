/**
 * Waiting, in a test, for what the app does in the background (a write committed, a subscriber connected, a page
 * being fetched): the suite's one poll loop, in the three forms its tests need.
 */
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * How long `condition` took to hold, in ms, polling every `everyMs`; null when it still did not after `ms`. For a
 * test of how soon something happens.
 */
export async function within(ms: number, condition: () => boolean | Promise<boolean>, everyMs = 10): Promise<number | null> {
  const started = Date.now()
  for (;;) {
    if (await condition()) return Date.now() - started
    if (Date.now() - started > ms) return null
    await sleep(everyMs)
  }
}

/** Whether `condition` came to hold within `ms` (polled every `everyMs`): false for the assertion to fail on. */
export async function waitFor(condition: () => boolean | Promise<boolean>, ms = 15_000, everyMs = 20): Promise<boolean> {
  return (await within(ms, condition, everyMs)) !== null
}

/** waitFor for a step the test needs before it can assert anything: throws, naming `what`, when it never holds. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 15_000, everyMs = 10): Promise<void> {
  if ((await within(ms, condition, everyMs)) === null) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
}
