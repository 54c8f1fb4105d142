import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { DeleteFolderQuery, FolderBody, FolderIdParams, FolderList, FolderRecord } from '../../schemas/folder.js'
import type { PrismaClient } from '../db/database.js'
import { fieldError, notFound } from '../errors/app-error.js'
import { folderNotEmpty, nameTaken } from '../errors/conflicts.js'
import { requireJsonBody } from '../plugins/json-body.js'
import { noContentResponse, problemResponsesWith } from '../plugins/openapi-entity-responses.js'
import { successResponse } from '../plugins/openapi-responses.js'
import { listFolders } from './folder-repository.js'
import { createFolder, deleteFolder, renameFolder, toFolderRecord } from './folder-service.js'

const problems = {
  badName: { description: 'validation_failed: the name is missing, blank or too long', examples: [fieldError('/name', 'must not be blank')] },
  notFound: { description: "not_found: no such folder in the token's workspace", examples: [notFound('folder')] },
  nameTaken: { description: 'name_taken: the workspace has a folder of that name', examples: [nameTaken('folder', 'Newsletter')] },
}

export default async function folderRoutes(app: FastifyInstance, options: { prisma: PrismaClient }) {
  const api = app.withTypeProvider<TypeBoxTypeProvider>()
  const { prisma } = options
  const common = { tags: ['folders'], security: [{ apiToken: [] }] }

  api.get(
    '/v1/folders',
    {
      onRequest: [app.authenticate],
      schema: {
        ...common,
        operationId: 'listFolders',
        summary: "List the workspace's folders",
        description: "Every folder of the workspace, by name, with how many links each holds. Links refer to them by folderId.",
        response: { 200: successResponse('The folders, by name', FolderList), ...problemResponsesWith({}, 401, 429, 500, 503) },
      },
    },
    async (request) => ({ folders: (await listFolders(prisma, request.caller.workspaceId)).map(toFolderRecord) }),
  )

  api.post(
    '/v1/folders',
    {
      onRequest: [app.authenticate, requireJsonBody],
      schema: {
        ...common,
        operationId: 'createFolder',
        summary: 'Create a folder',
        description: 'Creates a folder; the name is trimmed and must be unique in the workspace (else 409 name_taken).',
        body: Type.Ref(FolderBody),
        response: {
          201: successResponse('The new folder', FolderRecord),
          ...problemResponsesWith({ 400: problems.badName, 409: problems.nameTaken }, 401, 413, 415, 429, 500, 503),
        },
      },
    },
    async (request, reply) => {
      const folder = await createFolder(prisma, request.caller, request.body.name)
      return reply.code(201).send(toFolderRecord(folder))
    },
  )

  api.put(
    '/v1/folders/:id',
    {
      onRequest: [app.authenticate, requireJsonBody],
      schema: {
        ...common,
        operationId: 'renameFolder',
        summary: 'Rename a folder',
        description: 'Renames the folder; its links stay in it. The new name must be unique in the workspace (else 409 name_taken).',
        params: FolderIdParams,
        body: Type.Ref(FolderBody),
        response: {
          200: successResponse('The renamed folder', FolderRecord),
          ...problemResponsesWith(
            { 400: problems.badName, 404: problems.notFound, 409: problems.nameTaken },
            401, 413, 415, 429, 500, 503,
          ),
        },
      },
    },
    async (request) => toFolderRecord(await renameFolder(prisma, request.caller, request.params.id, request.body.name)),
  )

  api.delete(
    '/v1/folders/:id',
    {
      onRequest: [app.authenticate],
      schema: {
        ...common,
        operationId: 'deleteFolder',
        summary: 'Delete a folder',
        description:
          'A folder that holds links is refused (409 folder_not_empty) unless moveLinksTo or force=true says what ' +
          'becomes of them; the links whose folder changes get a new updatedDate.',
        params: FolderIdParams,
        querystring: DeleteFolderQuery,
        response: {
          204: noContentResponse('Deleted'),
          ...problemResponsesWith(
            {
              400: {
                description: 'validation_failed: moveLinksTo is not another folder of the workspace, or is given with force=true',
                examples: [fieldError('/moveLinksTo', 'is not a folder of this workspace')],
              },
              404: problems.notFound,
              409: { description: 'folder_not_empty: the folder holds links', examples: [folderNotEmpty(3, 12)] },
            },
            401, 429, 500, 503,
          ),
        },
      },
    },
    async (request, reply) => {
      await deleteFolder(prisma, request.caller, request.params.id, request.query)
      return reply.code(204).send()
    },
  )
}
