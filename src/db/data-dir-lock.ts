import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
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

/**
 * PGlite lets only one process open a data directory, and a second one would corrupt it rather than
 * fail. A lock file holding the owner's pid turns that into a plain error; a stale lock (its process
 * gone) is taken over. Returns the function that releases the lock.
 */
export function acquireDataDirLock(dataDir: string): () => void {
  const dir = resolve(dataDir)
  mkdirSync(dir, { recursive: true })
  const lockFile = join(dir, 'shortlinks.lock')
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lockFile, String(process.pid), { flag: 'wx' })
      let released = false
      return () => {
        if (released) return
        released = true
        rmSync(lockFile, { force: true })
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const owner = Number(readFileSync(lockFile, 'utf8').trim())
      if (owner && owner !== process.pid && isRunning(owner)) {
        throw new DataDirInUseError(
          `The embedded database in ${dataDir} is in use by process ${owner} (probably the running server). ` +
            'Stop that process first, or set DATABASE_URL to use a PostgreSQL server that several processes can share.',
        )
      }
      rmSync(lockFile, { force: true })
    }
  }
  throw new DataDirInUseError(`Could not lock the embedded database in ${dataDir}`)
}
