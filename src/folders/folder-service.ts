/** Folder rules around the repository: names trimmed and unique per workspace, and what deleting does to links. */
import type { DeleteFolderRequest, FolderRecordBody } from '../../schemas/folder.js'
import { isRowId } from '../../schemas/formats.js'
import type { PrismaClient } from '../db/database.js'
import { writeUniqueKey } from '../db/unique-key.js'
import { fieldError, notFound, validationFailed } from '../errors/app-error.js'
import { folderNotEmpty, nameTaken } from '../errors/conflicts.js'
import type { Caller } from '../plugins/auth.js'
import { cleanName } from '../workspaces/names.js'
import * as folders from './folder-repository.js'

export function toFolderRecord(folder: folders.StoredFolder): FolderRecordBody {
  return { id: folder.id, name: folder.name, linkCount: folder._count.links, createdAt: folder.createdAt.toISOString() }
}

/** An id the column cannot hold names no folder: a miss, not a database error (the route's schema refuses one first). */
function folderId(id: number): number {
  if (!isRowId(id)) throw notFound('folder')
  return id
}

export async function createFolder(prisma: PrismaClient, caller: Caller, name: string) {
  const clean = cleanName(name, '/name')
  return withUniqueName(prisma, caller.workspaceId, clean, () => folders.insertFolder(prisma, caller.workspaceId, clean))
}

/** A write of a folder's name: 409 name_taken, or the write again once a folder being deleted has freed the name. */
function withUniqueName<T>(prisma: PrismaClient, workspaceId: number, name: string, write: () => Promise<T>): Promise<T> {
  return writeUniqueKey(write, () => folders.folderHoldingName(prisma, workspaceId, name), () => nameTaken('folder', name))
}

export async function renameFolder(prisma: PrismaClient, caller: Caller, id: number, name: string) {
  const clean = cleanName(name, '/name')
  const folder = await withUniqueName(prisma, caller.workspaceId, clean, () =>
    folders.renameFolder(prisma, caller.workspaceId, folderId(id), clean),
  )
  if (!folder) throw notFound('folder')
  return folder
}

export async function deleteFolder(prisma: PrismaClient, caller: Caller, id: number, query: DeleteFolderRequest) {
  const number = folderId(id)
  if (query.moveLinksTo !== undefined && query.force === true) {
    throw validationFailed([
      { path: '/moveLinksTo', message: 'cannot be combined with force=true: choose one' },
      { path: '/force', message: 'cannot be combined with moveLinksTo: choose one' },
    ])
  }
  if (query.moveLinksTo === number) throw fieldError('/moveLinksTo', 'is the folder being deleted')
  const disposal: folders.LinkDisposal =
    query.moveLinksTo !== undefined ? { kind: 'move', to: query.moveLinksTo } : query.force ? { kind: 'unfile' } : { kind: 'refuse' }

  const outcome = await folders.deleteFolder(prisma, caller.workspaceId, number, disposal)
  if (outcome === 'missing') throw notFound('folder')
  if (outcome === 'target-missing') throw fieldError('/moveLinksTo', 'is not a folder of this workspace')
  if (outcome !== 'deleted') throw folderNotEmpty(number, outcome.holds)
}
