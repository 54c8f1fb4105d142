/**
 * The database index of a Redis URL as ioredis reads it: the path (`redis://host:6379/2`), else a `db` query
 * parameter (`redis://host:6379?db=2`); '' when it names none (database 0). The text as given: the configuration
 * checks that it is a whole number, and the start that the Redis has that database (src/plugins/redis.ts).
 */
export function redisDatabaseIndex(url: string): string {
  const { pathname, searchParams } = new URL(url)
  return pathname.length > 1 ? pathname.slice(1) : (searchParams.get('db') ?? '')
}
