/** Scripts: a workspace's HTML/JavaScript snippets that links attach by id (linkScripts). */
import { Type, type Static } from '@sinclair/typebox'
import { NOT_BLANK_PATTERN, PathId } from './formats.js'

export const SCRIPT_NAME_MAX = 100
/** The most a script may hold, in bytes of UTF-8 (the command line's limit too). */
export const SCRIPT_CONTENT_MAX_BYTES = 64 * 1024

const UtcDateTime = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds' })

const summaryFields = {
  id: Type.Integer({ description: 'The id links list in linkScripts' }),
  name: Type.String(),
  size: Type.Integer({ minimum: 1, description: 'Bytes of content (UTF-8)' }),
  createdAt: UtcDateTime,
  updatedAt: UtcDateTime,
}

const summaryExample = {
  id: 2,
  name: 'Chat widget',
  size: 38,
  createdAt: '2026-11-22T10:00:00.000Z',
  updatedAt: '2026-11-22T10:00:00.000Z',
}

export const ScriptSummary = Type.Object(summaryFields, {
  $id: 'ScriptSummary',
  description: 'A script without its content',
  examples: [summaryExample],
})

export const ScriptRecord = Type.Object(
  { ...summaryFields, content: Type.String({ description: 'The HTML or JavaScript' }) },
  { $id: 'ScriptRecord', examples: [{ ...summaryExample, content: '<script src="https://chat.example/w.js"></script>' }] },
)

export const ScriptList = Type.Object(
  { scripts: Type.Array(Type.Ref(ScriptSummary), { description: 'Oldest first; GET /v1/scripts/{id} has the content' }) },
  { $id: 'ScriptList', examples: [{ scripts: [summaryExample] }] },
)

const name = Type.String({ minLength: 1, maxLength: SCRIPT_NAME_MAX, description: 'Trimmed' })
const content = Type.String({
  // Not blank (so at least one character).
  pattern: NOT_BLANK_PATTERN,
  description: `HTML or JavaScript, at most 64 KiB (${SCRIPT_CONTENT_MAX_BYTES} bytes of UTF-8)`,
})

export const CreateScriptBody = Type.Object(
  { name, content },
  {
    $id: 'CreateScriptRequest',
    description: 'A script of the workspace, which links attach by id',
    examples: [{ name: 'Chat widget', content: '<script src="https://chat.example/w.js"></script>' }],
  },
)

export const UpdateScriptBody = Type.Partial(CreateScriptBody, {
  $id: 'UpdateScriptRequest',
  description: 'The fields to change; the links that attach the script get the new content',
  examples: [{ name: 'Chat widget (new)' }],
})

export const ScriptIdParams = Type.Object({
  id: PathId('The id of the script', 2),
})

export type ScriptSummaryBody = Static<typeof ScriptSummary>
export type ScriptRecordBody = Static<typeof ScriptRecord>
export type CreateScriptRequest = Static<typeof CreateScriptBody>
export type UpdateScriptRequest = Static<typeof UpdateScriptBody>
