/**
 * Social and search crawlers, told apart by the maintained `isbot` package. Its patterns also match
 * non-browser HTTP clients (curl, wget, HTTP libraries): they get the crawler page too (README, "Visitor
 * redirects"). Answers are remembered per User-Agent, which repeat heavily, since the pattern costs a few µs.
 */
import { isbot } from 'isbot'
import { LRUCache } from 'lru-cache'

const answers = new LRUCache<string, boolean>({ max: 5000 })

export function isCrawler(userAgent: string | undefined): boolean {
  if (!userAgent) return false
  let answer = answers.get(userAgent)
  if (answer === undefined) {
    answer = isbot(userAgent)
    // Very long strings are not kept: they would make the cache's memory unbounded.
    if (userAgent.length <= 512) answers.set(userAgent, answer)
  }
  return answer
}
