/**
 * How many times a request carries a header, read from Node's `rawHeaders` (absent from app.inject's requests):
 * for the headers that must come once, since Node keeps the first of some repeated headers (Host, Content-Type)
 * and joins others, where a proxy in front may read another.
 */
export function timesSent(rawHeaders: string[] | undefined, lowerCaseName: string): number {
  let count = 0
  if (!rawHeaders) return count
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]
    if (name.length === lowerCaseName.length && name.toLowerCase() === lowerCaseName) count++
  }
  return count
}
