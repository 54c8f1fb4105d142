/**
 * Writes that change what every link of a workspace shows visitors (a pixel's tag, a script's content): the
 * visitor side's cache forgets the workspace's links once such a write is stored, and also when it failed other
 * than with the service's own answer, since PostgreSQL may have stored it all the same (its answer lost with the
 * connection). The links' own writes do the same per link (src/links/link-service.ts, uncertainOnFailure).
 */
import { AppError } from '../errors/app-error.js'

export interface WorkspaceChanges {
  /** The write is stored. */
  changed(workspaceId: number): void
  /** The write failed, and may have been stored. */
  uncertain(workspaceId: number): void
}

export async function changingWorkspace<T>(changes: WorkspaceChanges | undefined, workspaceId: number, write: () => Promise<T>): Promise<T> {
  let result: T
  try {
    result = await write()
  } catch (error) {
    if (!(error instanceof AppError)) changes?.uncertain(workspaceId)
    throw error
  }
  changes?.changed(workspaceId)
  return result
}
