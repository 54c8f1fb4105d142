import { chmodSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError'
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** The pid a lock file names, or null for one that names none (empty, garbage, 0 or negative: never a process). */
function ownerOf(lockFile: string): number | null {
  let text: string
  try {
    text = readFileSync(lockFile, 'utf8').trim()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
  return /^[1-9][0-9]{0,9}$/.test(text) ? Number(text) : null
}

/** Creates the lock file with this process's pid in it, whole at once (a reader never sees it empty); false if it exists. */
function createLock(lockFile: string): boolean {
  const draft = `${lockFile}.${process.pid}`
  writeFileSync(draft, String(process.pid))
  try {
    linkSync(draft, lockFile)
    return true
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException
    if (code === 'EEXIST') return false
    if (!NO_HARD_LINKS.has(code ?? '')) throw error
  } finally {
    rmSync(draft, { force: true })
  }
  // A file system without hard links (FAT, some network shares): created, then written, as a plain file.
  try {
    writeFileSync(lockFile, String(process.pid), { flag: 'wx' })
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  }
}

/** What link() fails with on a file system that has no hard links. */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS'])

/**
 * Taking over a stale lock is two steps (remove, create), so two processes that both found it stale could each
 * remove it and create their own, one after the other. After a takeover a process waits a moment and checks that
 * the lock still names it: the one whose lock was removed finds the other's pid and gives up.
 */
const TAKEOVER_SETTLE_MS = 50

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

const LOCK_FILE = 'shortlinks.lock'
/** The data directory's mode: PGlite makes its files readable and writable by anyone (0666), as PostgreSQL would not. */
const PRIVATE = 0o700

/**
 * What a PostgreSQL data directory holds (PGlite writes them before PG_VERSION, so a first start cut short leaves
 * some of them and no PG_VERSION), and this service's lock.
 */
const DATABASE_ENTRY = /^(PG_VERSION|base|global|pg_[a-z_]+(\.conf)?|postgresql(\.auto)?\.conf|postmaster\.(pid|opts)|shortlinks\.lock)$/

/**
 * Makes the embedded database's directory (only its owner may enter it: the files inside hold the token hashes),
 * or checks the one that is there: a database's, begun or whole, or empty. A directory of other files is refused
 * rather than filled with a database's (a DATA_DIR of `.` or of a home directory, set by mistake), as initdb
 * refuses one.
 */
export function prepareDataDir(dataDir: string): void {
  const dir = resolve(dataDir)
  mkdirSync(dir, { recursive: true, mode: PRIVATE })
  const entries = readdirSync(dir)
  if (!entries.includes('PG_VERSION') && !entries.every((name) => DATABASE_ENTRY.test(name))) {
    throw new Error(`${dir} holds other files and no database (no PG_VERSION): set DATA_DIR to a new or empty directory`)
  }
  if ((statSync(dir).mode & 0o077) !== 0) {
    try {
      chmodSync(dir, PRIVATE)
    } catch {
      // Not its owner: the operator's directory, left as it was set up.
    }
  }
}

/**
 * PGlite lets only one process open a data directory, and a second one would corrupt it rather than
 * fail. A lock file holding the owner's pid turns that into a plain error; a stale lock (its process
 * gone) is taken over. Returns the function that releases the lock.
 */
export function acquireDataDirLock(dataDir: string, hooks: { afterTakeover?: () => void } = {}): () => void {
  const dir = resolve(dataDir)
  mkdirSync(dir, { recursive: true, mode: PRIVATE })
  const lockFile = join(dir, LOCK_FILE)
  const inUse = (owner: number) =>
    new DataDirInUseError(
      `The embedded database in ${dataDir} is in use by process ${owner} (probably the running server). ` +
        'Stop that process first, or set DATABASE_URL to use a PostgreSQL server that several processes can share. ' +
        `If no such process uses it (its pid was reused after a crash or a restart), delete ${lockFile}.`,
    )
  for (let attempt = 0; attempt < 3; attempt++) {
    let tookOver = false
    if (!createLock(lockFile)) {
      const owner = ownerOf(lockFile)
      if (owner !== null && owner !== process.pid && isRunning(owner)) throw inUse(owner)
      rmSync(lockFile, { force: true })
      if (!createLock(lockFile)) continue
      tookOver = true
    }
    if (tookOver) {
      sleepSync(TAKEOVER_SETTLE_MS)
      // Tests: another process's takeover within the moment.
      hooks.afterTakeover?.()
      const owner = ownerOf(lockFile)
      if (owner !== process.pid) {
        if (owner !== null && isRunning(owner)) throw inUse(owner)
        continue
      }
    }
    let released = false
    return () => {
      if (released) return
      released = true
      // Only a lock that is still this process's: never one another process took over meanwhile.
      if (ownerOf(lockFile) === process.pid) rmSync(lockFile, { force: true })
    }
  }
  throw new DataDirInUseError(`Could not lock the embedded database in ${dataDir} (${lockFile})`)
}
