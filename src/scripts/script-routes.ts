import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import {
  CreateScriptBody,
  SCRIPT_CONTENT_MAX_BYTES,
  ScriptIdParams,
  ScriptList,
  ScriptRecord,
  ScriptSummary,
  UpdateScriptBody,
} from '../../schemas/script.js'
import type { PrismaClient } from '../db/database.js'
import { fieldError, notFound, payloadTooLarge } from '../errors/app-error.js'
import { requireJsonBody } from '../plugins/json-body.js'
import { noContentResponse, problemResponsesWith } from '../plugins/openapi-entity-responses.js'
import { successResponse } from '../plugins/openapi-responses.js'
import { listScripts } from './script-repository.js'
import { createScript, deleteScript, getScript, toScriptRecord, toScriptSummary, updateScript } from './script-service.js'
import { NOT_DECIMAL_MESSAGE } from '../../schemas/formats.js'
import { changingWorkspace, type WorkspaceChanges } from '../redirects/workspace-changes.js'

/**
 * 64 KiB of content can take several times that as JSON (every control character or non-ASCII one may become a
 * six-character \u escape), so these bodies may be larger than the service's 64 KiB; the content rule itself is
 * checked on the decoded text, in bytes of UTF-8.
 */
export const SCRIPT_BODY_LIMIT = 512 * 1024

const problems = {
  badBody: {
    description: 'validation_failed: a blank name, or content over 64 KiB of UTF-8, named by JSON pointer',
    examples: [fieldError('/content', `must be at most ${SCRIPT_CONTENT_MAX_BYTES} bytes of UTF-8 (has 70000)`)],
  },
  badId: {
    description: 'validation_failed: the id is not a whole number from 1 to 2147483647 in plain decimal',
    examples: [fieldError('/id', NOT_DECIMAL_MESSAGE)],
  },
  notFound: { description: "not_found: no such script in the token's workspace", examples: [notFound('script')] },
  tooLarge: { description: 'payload_too_large: body over 512 KiB', examples: [payloadTooLarge(SCRIPT_BODY_LIMIT)] },
}

export default async function scriptRoutes(app: FastifyInstance, options: { prisma: PrismaClient; changes?: WorkspaceChanges }) {
  const api = app.withTypeProvider<TypeBoxTypeProvider>()
  const { prisma } = options
  const common = { tags: ['scripts'], security: [{ apiToken: [] }] }

  api.get(
    '/v1/scripts',
    {
      onRequest: [app.authenticate],
      schema: {
        ...common,
        operationId: 'listScripts',
        summary: "List the workspace's scripts, without their content",
        description:
          "Every script of the workspace, oldest first, with its name and size but not its content (GET /v1/scripts/{id} " +
          'has it). Links attach scripts by these ids (linkScripts).',
        response: { 200: successResponse('The scripts, oldest first', ScriptList), ...problemResponsesWith({}, 401, 429, 500, 503) },
      },
    },
    async (request) => ({ scripts: (await listScripts(prisma, request.caller.workspaceId)).map(toScriptSummary) }),
  )

  api.get(
    '/v1/scripts/:id',
    {
      onRequest: [app.authenticate],
      schema: {
        ...common,
        operationId: 'getScript',
        summary: 'Get a script with its content',
        description: "One script of the workspace, with its HTML or JavaScript content. Another workspace's script is a 404.",
        params: ScriptIdParams,
        response: {
          200: successResponse('The script', ScriptRecord),
          ...problemResponsesWith({ 400: problems.badId, 404: problems.notFound }, 401, 429, 500, 503),
        },
      },
    },
    async (request) => toScriptRecord(await getScript(prisma, request.caller, request.params.id)),
  )

  api.post(
    '/v1/scripts',
    {
      onRequest: [app.authenticate, requireJsonBody],
      bodyLimit: SCRIPT_BODY_LIMIT,
      schema: {
        ...common,
        operationId: 'createScript',
        summary: 'Create a script',
        description: 'Links attach it by id (linkScripts) and run it when linkScriptEnable is true.',
        body: Type.Ref(CreateScriptBody),
        response: {
          201: successResponse('The new script', ScriptRecord),
          ...problemResponsesWith({ 400: problems.badBody, 413: problems.tooLarge }, 401, 415, 429, 500, 503),
        },
      },
    },
    async (request, reply) => reply.code(201).send(toScriptRecord(await createScript(prisma, request.caller, request.body))),
  )

  api.put(
    '/v1/scripts/:id',
    {
      onRequest: [app.authenticate, requireJsonBody],
      bodyLimit: SCRIPT_BODY_LIMIT,
      schema: {
        ...common,
        operationId: 'updateScript',
        summary: 'Update a script',
        description: 'Changes the fields present; the links that attach the script run the new content.',
        params: ScriptIdParams,
        body: Type.Ref(UpdateScriptBody),
        response: {
          200: successResponse('The script after the change', ScriptRecord),
          ...problemResponsesWith(
            { 400: problems.badBody, 404: problems.notFound, 413: problems.tooLarge },
            401, 415, 429, 500, 503,
          ),
        },
      },
    },
    async (request) => {
      // The links that attach it show its new content to visitors.
      const { workspaceId } = request.caller
      const script = await changingWorkspace(options.changes, workspaceId, () => updateScript(prisma, request.caller, request.params.id, request.body))
      return toScriptRecord(script)
    },
  )

  api.delete(
    '/v1/scripts/:id',
    {
      onRequest: [app.authenticate],
      schema: {
        ...common,
        operationId: 'deleteScript',
        summary: 'Delete a script',
        description: "Also takes its id out of every link's linkScripts (those links get a new updatedDate).",
        params: ScriptIdParams,
        response: {
          204: noContentResponse('Deleted'),
          ...problemResponsesWith({ 400: problems.badId, 404: problems.notFound }, 401, 429, 500, 503),
        },
      },
    },
    async (request, reply) => {
      await changingWorkspace(options.changes, request.caller.workspaceId, () => deleteScript(prisma, request.caller, request.params.id))
      return reply.code(204).send()
    },
  )
}
