/**
 * Changes this process makes to what the API caches hold (src/cache/ttl-cache.ts): a token revoked, a domain
 * added or made default. Bumping the generation empties those caches in this process at once; other processes
 * (other instances, after the command line changed something) see the change when their entries expire, within
 * CACHE_TTL_MS.
 */

/** How long a cached token or domain answer is used: a revoked token is refused by every instance within it. */
export const CACHE_TTL_MS = 1000

let tokenGeneration = 0
let domainGeneration = 0

export const tokensGeneration = () => tokenGeneration
export const domainsGeneration = () => domainGeneration

export function tokensChanged(): void {
  tokenGeneration++
}

export function domainsChanged(): void {
  domainGeneration++
}
