/** Folders: a workspace's named groups of links (GET/POST /v1/folders, PUT/DELETE /v1/folders/{id}). */
import { Type, type Static } from '@sinclair/typebox'
import { MAX_ROW_ID, PathId } from './formats.js'

export const FOLDER_NAME_MAX = 100

const UtcDateTime = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds' })

export const FolderRecord = Type.Object(
  {
    id: Type.Integer({ description: 'The folderId links refer to' }),
    name: Type.String(),
    linkCount: Type.Integer({ minimum: 0, description: 'How many links the folder holds' }),
    createdAt: UtcDateTime,
  },
  {
    $id: 'FolderRecord',
    examples: [{ id: 3, name: 'Newsletter', linkCount: 12, createdAt: '2026-11-22T10:00:00.000Z' }],
  },
)

export const FolderList = Type.Object(
  { folders: Type.Array(Type.Ref(FolderRecord), { description: 'By name' }) },
  {
    $id: 'FolderList',
    examples: [{ folders: FolderRecord.examples }],
  },
)

export const FolderBody = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: FOLDER_NAME_MAX,
      description: 'Trimmed; unique in the workspace (exact spelling)',
    }),
  },
  { $id: 'FolderRequest', description: 'A folder to create, or its new name', examples: [{ name: 'Newsletter' }] },
)

export const FolderIdParams = Type.Object({
  id: PathId('The id of the folder', 3),
})

export const DeleteFolderQuery = Type.Object({
  moveLinksTo: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_ROW_ID,
      description: 'Move the links of the folder to this folder of the workspace, then delete it',
    }),
  ),
  force: Type.Optional(
    Type.Boolean({ description: 'Delete the folder even though it holds links; they are kept, in no folder' }),
  ),
})

export type FolderRecordBody = Static<typeof FolderRecord>
export type FolderRequest = Static<typeof FolderBody>
export type DeleteFolderRequest = Static<typeof DeleteFolderQuery>
