/**
 * Device type, operating system and browser of a visit, read from its User-Agent by `bowser` (MIT, maintained;
 * ua-parser-js 2.x would have been the other choice but is AGPL). Bots are told by the same package that decides
 * who gets the crawler page (isbot, src/redirects/crawler.ts), so a crawler preview is always a bot visit.
 * Parsing costs tens of microseconds, so it runs when a batch is written, never while a visitor waits, and
 * answers are remembered per User-Agent, which repeat heavily.
 */
import Bowser from 'bowser'
import { LRUCache } from 'lru-cache'
import { isCrawler } from '../redirects/crawler.js'

export interface UserAgentFacts {
  /** desktop, mobile, tablet, tv, bot (a bot's, or no User-Agent at all) or other (one nothing is known of). */
  device: string
  os: string | null
  browser: string | null
  bot: boolean
}

const parsed = new LRUCache<string, UserAgentFacts>({ max: 5000 })

/** Longer strings are not kept in the cache (its memory stays bounded) and are read from their start only. */
const MAX_CACHED_LENGTH = 512
export const MAX_PARSED_LENGTH = 2048

function parse(userAgent: string): UserAgentFacts {
  const { browser, os, platform } = Bowser.parse(userAgent.slice(0, MAX_PARSED_LENGTH))
  const bot = isCrawler(userAgent) || platform.type === 'bot'
  const device = bot ? 'bot' : platform.type && ['desktop', 'mobile', 'tablet', 'tv'].includes(platform.type) ? platform.type : 'other'
  return { device, os: os.name || null, browser: browser.name || null, bot }
}

export function userAgentFacts(userAgent: string | undefined): UserAgentFacts {
  // No browser leaves the header out: a client that does is a program (a link checker, an HTTP library), not a person.
  if (!userAgent) return { device: 'bot', os: null, browser: null, bot: true }
  let facts = parsed.get(userAgent)
  if (!facts) {
    facts = parse(userAgent)
    if (userAgent.length <= MAX_CACHED_LENGTH) parsed.set(userAgent, facts)
  }
  return facts
}
