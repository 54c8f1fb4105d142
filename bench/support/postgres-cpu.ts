/**
 * The CPU time of the PostgreSQL server's processes on this machine (Linux /proc), to tell what a request costs
 * the database beside what it costs the service: on a machine whose cores the two share, either can be the
 * bottleneck. Every process named `postgres` counts, whoever it serves (nothing else should load the server
 * during a benchmark); one that exits between two snapshots is missed (the benchmarks keep their pools open).
 */
import { readdirSync, readFileSync } from 'node:fs'

/** Linux's clock ticks a second (USER_HZ), 100 on every current architecture. */
const TICKS_PER_SECOND = 100

/** CPU ticks per PostgreSQL process id; null where /proc or a local PostgreSQL is not there. */
export type PostgresCpu = Map<string, number> | null

export function postgresCpu(): PostgresCpu {
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return null
  }
  const ticks = new Map<string, number>()
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    } catch {
      continue // exited meanwhile
    }
    // pid (comm) state ppid …: the command may hold spaces, so fields are counted after its closing parenthesis.
    const close = stat.lastIndexOf(')')
    if (stat.slice(stat.indexOf('(') + 1, close) !== 'postgres') continue
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after "pid (comm)".
    const fields = stat.slice(close + 2).split(' ')
    ticks.set(pid, Number(fields[11]) + Number(fields[12]))
  }
  return ticks.size > 0 ? ticks : null
}

/** Microseconds of PostgreSQL CPU from `before` to `after` (a process started in between counts whole). */
export function postgresCpuMicros(before: PostgresCpu, after: PostgresCpu): number | null {
  if (before === null || after === null) return null
  let ticks = 0
  for (const [pid, now] of after) ticks += now - (before.get(pid) ?? 0)
  return (ticks * 1_000_000) / TICKS_PER_SECOND
}
