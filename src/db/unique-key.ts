/**
 * Writes that may collide with a unique key another row holds (a pixel's platform and value, a folder's name).
 *
 * A row being deleted keeps its key until the deleting transaction ends. While that transaction has only locked
 * the row (the pixel and folder deletes lock it first, then see to its links), PostgreSQL refuses a write of the
 * same key at once instead of waiting. So, after a unique violation, `findHolder` looks for the row that holds
 * the key with `FOR KEY SHARE`, which waits for such a delete: a holder is the conflict to report; none means the
 * key was freed meanwhile, and the write is tried again.
 */
import { isUniqueViolation } from './errors.js'

/** Each retry follows a delete that committed meanwhile; three in a row is not a race any more. */
const WRITE_ATTEMPTS = 3

export async function writeUniqueKey<T, Holder>(
  write: () => Promise<T>,
  findHolder: () => Promise<Holder | undefined>,
  conflict: (holder: Holder) => Error,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write()
    } catch (error) {
      if (!isUniqueViolation(error)) throw error
      const holder = await findHolder()
      if (holder !== undefined) throw conflict(holder)
      if (attempt >= WRITE_ATTEMPTS) throw error
    }
  }
}
