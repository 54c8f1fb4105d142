/** Pixels as workspace entities (GET/POST /v1/pixels, PUT/DELETE /v1/pixels/{uuid}); links refer to them. */
import { Type, type Static } from '@sinclair/typebox'
import { PixelInput, PixelRecord, Platform } from './link.js'

const example = {
  id: '6f1c2a9e-4a39-4c55-9d3e-2b7c8f0a1d22',
  platform: 'facebook',
  value: '1234567890',
  title: 'Retargeting',
  workspaceId: 1,
  createdAt: '2026-11-22T10:00:00.000Z',
}

/** The Pixel of the link record, registered under a name of its own for these routes. */
export const Pixel = Type.Object(PixelRecord.properties, { $id: 'Pixel', examples: [example] })

export const PixelList = Type.Object(
  { pixels: Type.Array(Type.Ref(Pixel), { description: 'Oldest first' }) },
  { $id: 'PixelList', examples: [{ pixels: [example] }] },
)

const { value, title } = PixelInput.properties

export const CreatePixelBody = Type.Object(
  { platform: Platform, value, title },
  {
    description: 'A pixel; platform and value are unique in the workspace',
    examples: [{ platform: 'facebook', value: '1234567890', title: 'Retargeting' }],
  },
)

export const UpdatePixelBody = Type.Partial(CreatePixelBody, {
  description: 'The fields to change; null clears the title. The links that use the pixel follow it.',
  examples: [{ title: 'Retargeting (EU)' }],
})

export const PixelParams = Type.Object({
  uuid: Type.String({ format: 'uuid', description: 'The id of the pixel', examples: [example.id] }),
})

export type PixelBody = Static<typeof Pixel>
export type CreatePixelRequest = Static<typeof CreatePixelBody>
export type UpdatePixelRequest = Static<typeof UpdatePixelBody>
