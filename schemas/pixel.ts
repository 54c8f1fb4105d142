/** Pixels as workspace entities (GET/POST /v1/pixels, PUT/DELETE /v1/pixels/{uuid}); links refer to them. */
import { Type, type Static } from '@sinclair/typebox'
import { PIXEL_EXAMPLE, PixelInput, PixelRecord, Platform } from './link.js'

/** The Pixel of the link record (one component for both). */
export const Pixel = PixelRecord
const example = PIXEL_EXAMPLE

export const PixelList = Type.Object(
  { pixels: Type.Array(Type.Ref(Pixel), { description: 'Oldest first' }) },
  { $id: 'PixelList', examples: [{ pixels: [example] }] },
)

const { value, title } = PixelInput.properties

export const CreatePixelBody = Type.Object(
  { platform: Platform, value, title },
  {
    $id: 'CreatePixelRequest',
    description: 'A pixel; platform and value are unique in the workspace',
    examples: [{ platform: 'facebook', value: '1234567890', title: 'Retargeting' }],
  },
)

export const UpdatePixelBody = Type.Partial(CreatePixelBody, {
  $id: 'UpdatePixelRequest',
  description: 'The fields to change; null clears the title. The links that use the pixel follow it.',
  examples: [{ title: 'Retargeting (EU)' }],
})

export const PixelParams = Type.Object({
  uuid: Type.String({ format: 'uuid', description: 'The id of the pixel', examples: [example.id] }),
})

export type PixelBody = Static<typeof Pixel>
export type CreatePixelRequest = Static<typeof CreatePixelBody>
export type UpdatePixelRequest = Static<typeof UpdatePixelBody>
