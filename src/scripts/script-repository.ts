/** Every database access of scripts. */
import type { PrismaClient } from '../db/database.js'
import { inTransaction } from '../db/transaction.js'
import type { Prisma } from '../generated/prisma/client.js'

export type StoredScript = Prisma.ScriptGetPayload<object>
export type ScriptSummary = Omit<StoredScript, 'content'> & { size: number }

/** The scripts without their content (up to 64 KiB each), with its size in bytes measured by the database. */
export function listScripts(prisma: PrismaClient, workspaceId: number): Promise<ScriptSummary[]> {
  return prisma.$queryRaw<ScriptSummary[]>`
    SELECT "id", "workspaceId", "name", octet_length("content") AS "size", "createdAt", "updatedAt"
    FROM "Script" WHERE "workspaceId" = ${workspaceId} ORDER BY "id"`
}

export function findScript(prisma: PrismaClient, workspaceId: number, id: number): Promise<StoredScript | null> {
  return prisma.script.findFirst({ where: { id, workspaceId } })
}

export function insertScript(prisma: PrismaClient, script: { workspaceId: number; name: string; content: string }) {
  return prisma.script.create({ data: script })
}

/** Null when the workspace has no such script. */
export async function updateScript(
  prisma: PrismaClient,
  workspaceId: number,
  id: number,
  changes: { name?: string; content?: string },
): Promise<StoredScript | null> {
  const { count } = await prisma.script.updateMany({ where: { id, workspaceId }, data: changes })
  return count === 0 ? null : findScript(prisma, workspaceId, id)
}

/**
 * Deletes the script and takes its id out of the linkScripts of every link of the workspace (a link left with
 * none keeps []), in one transaction so no link is left naming a script that is gone. False when it was gone.
 */
export async function deleteScript(prisma: PrismaClient, workspaceId: number, id: number): Promise<boolean> {
  return inTransaction(prisma, async (tx) => {
    // The delete locks the script before the links, the order in which a link's write locks them
    // (src/links/link-repository.ts): a link being saved with this script either finishes first (and is
    // cleaned below) or waits and finds it gone (a 400).
    const { count } = await tx.script.deleteMany({ where: { id, workspaceId } })
    if (count === 0) return false
    // linkScripts is a JSON array of numbers; jsonb's "-" operator removes strings only, hence the rebuild.
    // The links' records change, so their updatedDate does too (in UTC, as Prisma writes it; never backwards).
    await tx.$executeRaw`
      UPDATE "Link" SET
        "linkScripts" = COALESCE(
          (SELECT jsonb_agg(element ORDER BY position)
             FROM jsonb_array_elements("linkScripts") WITH ORDINALITY AS entry(element, position)
            WHERE element <> to_jsonb(${id}::int)),
          '[]'::jsonb),
        "updatedAt" = GREATEST("updatedAt", ${new Date().toISOString()}::timestamp(3))
      WHERE "workspaceId" = ${workspaceId} AND "linkScripts" @> jsonb_build_array(${id}::int)`
    return true
  })
}
