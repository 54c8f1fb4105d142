/** Script rules around the repository: a trimmed name and at most 64 KiB of UTF-8 content. */
import {
  SCRIPT_CONTENT_MAX_BYTES,
  type CreateScriptRequest,
  type ScriptRecordBody,
  type ScriptSummaryBody,
  type UpdateScriptRequest,
} from '../../schemas/script.js'
import { isRowId } from '../../schemas/formats.js'
import type { FieldErrorBody } from '../../schemas/problem.js'
import type { PrismaClient } from '../db/database.js'
import { notFound, validationFailed } from '../errors/app-error.js'
import type { Caller } from '../plugins/auth.js'
import { nameProblem } from '../workspaces/names.js'
import * as scripts from './script-repository.js'


export function toScriptSummary(script: scripts.ScriptSummary): ScriptSummaryBody {
  return {
    id: script.id,
    name: script.name,
    size: Number(script.size),
    createdAt: script.createdAt.toISOString(),
    updatedAt: script.updatedAt.toISOString(),
  }
}

export function toScriptRecord(script: scripts.StoredScript): ScriptRecordBody {
  return { ...toScriptSummary({ ...script, size: Buffer.byteLength(script.content) }), content: script.content }
}

/** An id the column cannot hold names no script: a miss, not a database error (the route's schema refuses one first). */
function scriptId(id: number): number {
  if (!isRowId(id)) throw notFound('script')
  return id
}

/** The fields present, checked together so one 400 names every bad one. */
function parseScript(body: UpdateScriptRequest): { name?: string; content?: string } {
  const errors: FieldErrorBody[] = []
  const out: { name?: string; content?: string } = {}
  if (body.name !== undefined) {
    out.name = body.name.trim()
    const problem = nameProblem(out.name)
    if (problem) errors.push({ path: '/name', message: problem })
  }
  if (body.content !== undefined) {
    // The limit is on bytes, as the command line's: JSON escaping and multi-byte characters make the body longer.
    const bytes = Buffer.byteLength(body.content)
    if (bytes > SCRIPT_CONTENT_MAX_BYTES) {
      errors.push({ path: '/content', message: `must be at most ${SCRIPT_CONTENT_MAX_BYTES} bytes of UTF-8 (has ${bytes})` })
    }
    // PostgreSQL text cannot hold NUL, and HTML or JavaScript has no use for it.
    if (body.content.includes('\0')) errors.push({ path: '/content', message: 'must not contain NUL characters' })
    out.content = body.content
  }
  if (errors.length > 0) throw validationFailed(errors)
  return out
}

export async function getScript(prisma: PrismaClient, caller: Caller, id: number) {
  const script = await scripts.findScript(prisma, caller.workspaceId, scriptId(id))
  if (!script) throw notFound('script')
  return script
}

export async function createScript(prisma: PrismaClient, caller: Caller, body: CreateScriptRequest) {
  const { name, content } = parseScript(body) as Required<CreateScriptRequest>
  return scripts.insertScript(prisma, { workspaceId: caller.workspaceId, name, content })
}

export async function updateScript(prisma: PrismaClient, caller: Caller, id: number, body: UpdateScriptRequest) {
  const changes = parseScript(body)
  const number = scriptId(id)
  const script =
    Object.keys(changes).length === 0
      ? await scripts.findScript(prisma, caller.workspaceId, number)
      : await scripts.updateScript(prisma, caller.workspaceId, number, changes)
  if (!script) throw notFound('script')
  return script
}

export async function deleteScript(prisma: PrismaClient, caller: Caller, id: number) {
  if (!(await scripts.deleteScript(prisma, caller.workspaceId, scriptId(id)))) throw notFound('script')
}
