/** Folder rules around the repository: names trimmed and unique per workspace, and what deleting does to links. */
import type { DeleteFolderRequest, FolderRecordBody } from '../../schemas/folder.js'
import { isRowId } from '../../schemas/formats.js'
import type { PrismaClient } from '../db/database.js'
import { isUniqueViolation } from '../db/errors.js'
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
  try {
    return await folders.insertFolder(prisma, caller.workspaceId, clean)
  } catch (error) {
    if (isUniqueViolation(error)) throw nameTaken('folder', clean)
    throw error
  }
}

export async function renameFolder(prisma: PrismaClient, caller: Caller, id: number, name: string) {
  const clean = cleanName(name, '/name')
  let folder: folders.StoredFolder | null
  try {
    folder = await folders.renameFolder(prisma, caller.workspaceId, folderId(id), clean)
  } catch (error) {
    if (isUniqueViolation(error)) throw nameTaken('folder', clean)
    throw error
  }
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
