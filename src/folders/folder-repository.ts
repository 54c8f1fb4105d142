/** Every database access of folders. */
import { GROUPED_LINK_COLUMNS, lockRollup, moveGroupHistory, type GroupedLink, type Run } from '../analytics/group-history.js'
import type { PrismaClient } from '../db/database.js'
import { inTransaction, retryingConflicts } from '../db/transaction.js'

const withLinkCount = { _count: { select: { links: true } } } as const

export function listFolders(prisma: PrismaClient, workspaceId: number) {
  return prisma.folder.findMany({ where: { workspaceId }, orderBy: [{ name: 'asc' }, { id: 'asc' }], include: withLinkCount })
}

export type StoredFolder = Awaited<ReturnType<typeof listFolders>>[number]

export function findFolder(prisma: PrismaClient, workspaceId: number, id: number): Promise<StoredFolder | null> {
  return prisma.folder.findFirst({ where: { id, workspaceId }, include: withLinkCount })
}

/** Throws P2002 when the workspace has a folder of that name. */
export function insertFolder(prisma: PrismaClient, workspaceId: number, name: string): Promise<StoredFolder> {
  return prisma.folder.create({ data: { workspaceId, name }, include: withLinkCount })
}

/** The folder that holds the name, once a delete of it under way has ended (src/db/unique-key.ts). */
export async function folderHoldingName(prisma: PrismaClient, workspaceId: number, name: string) {
  const [holder] = await prisma.$queryRaw<{ id: number }[]>`
    SELECT "id" FROM "Folder" WHERE "workspaceId" = ${workspaceId} AND "name" = ${name} FOR KEY SHARE`
  return holder
}

/** Null when the workspace has no such folder; throws P2002 when it has another folder of that name. */
export async function renameFolder(prisma: PrismaClient, workspaceId: number, id: number, name: string) {
  const { count } = await retryingConflicts(() => prisma.folder.updateMany({ where: { id, workspaceId }, data: { name } }))
  return count === 0 ? null : findFolder(prisma, workspaceId, id)
}

/** What becomes of the links of a folder being deleted: refused while there are any, moved, or left in no folder. */
export type LinkDisposal = { kind: 'refuse' } | { kind: 'move'; to: number } | { kind: 'unfile' }

export type DeleteOutcome = 'deleted' | 'missing' | 'target-missing' | { holds: number }

export async function deleteFolder(
  prisma: PrismaClient,
  workspaceId: number,
  id: number,
  disposal: LinkDisposal,
): Promise<DeleteOutcome> {
  return inTransaction(prisma, async (tx) => {
    const run: Run = (sql, params) => tx.$queryRawUnsafe<unknown[]>(sql, ...params)
    // Links that change folder move their history between the folders' aggregates: the rollup's row is taken
    // before anything else, as every link update that changes a folder takes it before the link's row and the
    // folder's (group-history.ts); after the folder's, the two could each wait for the other.
    if (disposal.kind !== 'refuse') await lockRollup(run)
    // Locking the folder first makes a link being filed into it meanwhile either finish before the count (and be
    // counted) or wait for the delete and fail its foreign key (a 400); without it, the foreign key would
    // silently take such a link out.
    const locked = await tx.$queryRaw<unknown[]>`
      SELECT 1 FROM "Folder" WHERE "id" = ${id} AND "workspaceId" = ${workspaceId} FOR UPDATE`
    if (locked.length === 0) return 'missing'
    if (disposal.kind === 'refuse') {
      const holds = await tx.link.count({ where: { folderId: id } })
      if (holds > 0) return { holds }
    } else {
      if (disposal.kind === 'move') {
        // Locked as the links' foreign key will lock it: a target deleted meanwhile is missing here, not a 500 later.
        const target = await tx.$queryRaw<unknown[]>`
          SELECT 1 FROM "Folder" WHERE "id" = ${disposal.to} AND "workspaceId" = ${workspaceId} FOR KEY SHARE`
        if (target.length === 0) return 'target-missing'
      }
      // A link's record changes with its folder, so its updatedDate does too (never backwards: GREATEST with the stored one).
      const to = disposal.kind === 'move' ? disposal.to : null
      const moved = await tx.$queryRawUnsafe<GroupedLink[]>(
        `UPDATE "Link" SET "folderId" = $1::int, "updatedAt" = GREATEST("updatedAt", $2::timestamp(3))
         WHERE "folderId" = $3 RETURNING ${GROUPED_LINK_COLUMNS}`,
        to,
        new Date().toISOString(),
        id,
      )
      await moveGroupHistory(run, moved.map((link) => ({ before: { ...link, folderId: id }, after: link })))
    }
    await tx.folder.delete({ where: { id } })
    return 'deleted'
  })
}
