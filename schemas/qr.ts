/**
 * GET /v1/links/{uniqId}/qr and, on the short domains, GET /<slug>/qr: how the QR code of a link's short address
 * is drawn. One schema for both routes, so they accept exactly the same parameters, with the same 400s.
 */
import { Type, type Static } from '@sinclair/typebox'
import { StringEnum } from './enum.js'
import { HEX_COLOR_PATTERN } from './formats.js'

/** Pixels of the whole image, quiet zone included: a thumbnail at least, a poster print at most (2048² is 4 Mpx). */
export const QR_SIZE = { min: 64, max: 2048, default: 300 } as const
/** In modules (the code's squares). 4 is what ISO/IEC 18004 asks for; 0 for codes placed on a border of their own. */
export const QR_MARGIN = { min: 0, max: 16, default: 4 } as const
export const QR_LEVELS = ['L', 'M', 'Q', 'H'] as const
export const QR_FORMATS = ['svg', 'png'] as const

const HexColor = (description: string, fallback: string) =>
  Type.String({ pattern: HEX_COLOR_PATTERN, default: fallback, description, examples: [fallback] })

export const QrQuery = Type.Object({
  format: Type.Optional(
    StringEnum(QR_FORMATS, { default: 'svg', description: '`svg` (image/svg+xml, the default) or `png` (image/png)' }),
  ),
  size: Type.Optional(
    Type.Integer({
      minimum: QR_SIZE.min,
      maximum: QR_SIZE.max,
      default: QR_SIZE.default,
      description:
        `Width and height of the whole image in pixels, margin included, ${QR_SIZE.min} to ${QR_SIZE.max}; ` +
        'it must give each module at least one pixel (a long address at level H needs more than 64)',
    }),
  ),
  margin: Type.Optional(
    Type.Integer({
      minimum: QR_MARGIN.min,
      maximum: QR_MARGIN.max,
      default: QR_MARGIN.default,
      description: `Quiet zone around the code, in modules, ${QR_MARGIN.min} to ${QR_MARGIN.max} (4 is the standard's)`,
    }),
  ),
  level: Type.Optional(
    StringEnum(QR_LEVELS, {
      default: 'M',
      description: 'Error correction: L (7% of the code may be lost), M (15%, the default), Q (25%) or H (30%)',
    }),
  ),
  color: Type.Optional(HexColor('Colour of the dark modules: rrggbb or rrggbbaa, with or without #', '000000')),
  background: Type.Optional(
    HexColor('Colour of the light modules and the margin: rrggbb or rrggbbaa (00 alpha: transparent)', 'ffffff'),
  ),
})

export type QrRequest = Static<typeof QrQuery>
