import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { formatMessages } from '../../schemas/formats.js'
import { CreatePixelBody, Pixel, PixelList, PixelParams, UpdatePixelBody } from '../../schemas/pixel.js'
import type { PrismaClient } from '../db/database.js'
import { fieldError, notFound } from '../errors/app-error.js'
import { pixelExists } from '../errors/conflicts.js'
import { requireJsonBody } from '../plugins/json-body.js'
import { noContentResponse, problemResponsesWith } from '../plugins/openapi-entity-responses.js'
import { successResponse } from '../plugins/openapi-responses.js'
import { listPixels } from './pixel-repository.js'
import { createPixel, deletePixel, toPixelRecord, updatePixel } from './pixel-service.js'
import { changingWorkspace, type WorkspaceChanges } from '../redirects/workspace-changes.js'

const problems = {
  badBody: {
    description: 'validation_failed: every offending field by JSON pointer (an unknown platform, an empty value, …)',
    examples: [fieldError('/platform', 'must be one of: linkedin, facebook, gtm, …')],
  },
  badUuid: { description: 'validation_failed: the path does not hold a UUID', examples: [fieldError('/uuid', formatMessages.uuid)] },
  notFound: { description: "not_found: no such pixel in the token's workspace", examples: [notFound('pixel')] },
  exists: {
    description: 'pixel_exists: the workspace has a pixel of that platform and value; the detail names its id',
    examples: [pixelExists('facebook', '1234567890', '6f1c2a9e-4a39-4c55-9d3e-2b7c8f0a1d22')],
  },
}

export default async function pixelRoutes(app: FastifyInstance, options: { prisma: PrismaClient; changes?: WorkspaceChanges }) {
  const api = app.withTypeProvider<TypeBoxTypeProvider>()
  const { prisma } = options
  const common = { tags: ['pixels'], security: [{ apiToken: [] }] }

  api.get(
    '/v1/pixels',
    {
      onRequest: [app.authenticate],
      schema: {
        ...common,
        operationId: 'listPixels',
        summary: "List the workspace's pixels",
        description: "Every tracking pixel of the workspace, oldest first. Links use them by id or by platform and value.",
        response: { 200: successResponse('The pixels, oldest first', PixelList), ...problemResponsesWith({}, 401, 429, 500, 503) },
      },
    },
    async (request) => ({ pixels: (await listPixels(prisma, request.caller.workspaceId)).map(toPixelRecord) }),
  )

  api.post(
    '/v1/pixels',
    {
      onRequest: [app.authenticate, requireJsonBody],
      schema: {
        ...common,
        operationId: 'createPixel',
        summary: 'Create a pixel',
        description: 'Links can then name it by its id (or by its platform and value).',
        body: Type.Ref(CreatePixelBody),
        response: {
          201: successResponse('The new pixel', Pixel),
          ...problemResponsesWith({ 400: problems.badBody, 409: problems.exists }, 401, 413, 415, 429, 500, 503),
        },
      },
    },
    async (request, reply) => reply.code(201).send(toPixelRecord(await createPixel(prisma, request.caller, request.body))),
  )

  api.put(
    '/v1/pixels/:uuid',
    {
      onRequest: [app.authenticate, requireJsonBody],
      schema: {
        ...common,
        operationId: 'updatePixel',
        summary: 'Update a pixel',
        description: 'Changes the fields present; every link that uses the pixel uses the changed one.',
        params: PixelParams,
        body: Type.Ref(UpdatePixelBody),
        response: {
          200: successResponse('The pixel after the change', Pixel),
          ...problemResponsesWith(
            { 400: problems.badBody, 404: problems.notFound, 409: problems.exists },
            401, 413, 415, 429, 500, 503,
          ),
        },
      },
    },
    async (request) => {
      // The links that use it load the changed tag for visitors.
      const { workspaceId } = request.caller
      const pixel = await changingWorkspace(options.changes, workspaceId, () => updatePixel(prisma, request.caller, request.params.uuid, request.body))
      return toPixelRecord(pixel)
    },
  )

  api.delete(
    '/v1/pixels/:uuid',
    {
      onRequest: [app.authenticate],
      schema: {
        ...common,
        operationId: 'deletePixel',
        summary: 'Delete a pixel',
        description: 'The links that used the pixel lose it (and get a new updatedDate).',
        params: PixelParams,
        response: {
          204: noContentResponse('Deleted'),
          ...problemResponsesWith({ 400: problems.badUuid, 404: problems.notFound }, 401, 429, 500, 503),
        },
      },
    },
    async (request, reply) => {
      await changingWorkspace(options.changes, request.caller.workspaceId, () => deletePixel(prisma, request.caller, request.params.uuid))
      return reply.code(204).send()
    },
  )
}
