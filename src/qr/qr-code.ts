/**
 * The QR code of a link's short address, as SVG or PNG. The `qrcode` package (MIT) encodes the text (segments,
 * version, Reed-Solomon error correction, mask choice: the part that is easy to get subtly wrong); the two
 * drawings are made here from its module matrix, so both formats show the same modules and the image is exactly
 * `size` pixels wide (the package's own PNG renderer comes out a pixel short for many sizes, and costs 16 MB and
 * about 0.4 s at 2048 pixels).
 */
import { createHash } from 'node:crypto'
import QRCode from 'qrcode'
import type { QrRequest } from '../../schemas/qr.js'
import { QR_MARGIN, QR_SIZE } from '../../schemas/qr.js'
import { validationFailed } from '../errors/app-error.js'
import type { FieldErrorBody } from '../../schemas/problem.js'
import { twoColourPng, type Rgba } from './png.js'

export interface QrOptions {
  format: 'svg' | 'png'
  size: number
  margin: number
  level: 'L' | 'M' | 'Q' | 'H'
  color: Rgba
  background: Rgba
}

export interface QrImage {
  contentType: 'image/svg+xml' | 'image/png'
  body: Buffer
}

/**
 * The least contrast (WCAG's ratio of relative luminances, 1 to 21) a code may have. Phone cameras binarise the
 * image; a light grey or yellow on white (about 1.1:1), or a colour against itself, gives a code nobody can
 * scan, which is only found out once printed. 3:1 still allows brand colours (#949494 on white is 3:1).
 */
export const MIN_CONTRAST = 3

/** Bumped when the drawing changes, so ETags of the old images no longer match. */
const DRAWING_VERSION = '2'

function parseColor(hex: string): Rgba {
  const digits = hex.replace(/^#/, '')
  const byte = (at: number) => parseInt(digits.slice(at, at + 2), 16)
  return { r: byte(0), g: byte(2), b: byte(4), a: digits.length === 8 ? byte(6) : 255 }
}

/** `top` over `bottom` (alpha compositing), opaque. */
function over(top: Rgba, bottom: Rgba): Rgba {
  const alpha = top.a / 255
  const mix = (a: number, b: number) => a * alpha + b * (1 - alpha)
  return { r: mix(top.r, bottom.r), g: mix(top.g, bottom.g), b: mix(top.b, bottom.b), a: 255 }
}

/** WCAG 2 relative luminance of an opaque colour. */
function luminance({ r, g, b }: Rgba): number {
  const linear = (channel: number) => {
    const value = channel / 255
    return value <= 0.03928 ? value / 12.92 : ((value + 0.055) / 1.055) ** 2.4
  }
  return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
}

/** The contrast of the code as printed on white paper: a transparent background shows the paper. */
export function contrastRatio(color: Rgba, background: Rgba): number {
  const paper: Rgba = { r: 255, g: 255, b: 255, a: 255 }
  const light = over(background, paper)
  const [a, b] = [luminance(over(color, light)), luminance(light)]
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)
}

/**
 * The options of a validated query (AJV has put the defaults in already; they are repeated for the types), or
 * a 400 naming both colours when they are too alike to scan. Light modules darker than dark ones (an inverted
 * code) are allowed: ISO/IEC 18004 permits them and current phone cameras read them.
 */
export function qrOptions(query: QrRequest): QrOptions {
  const options: QrOptions = {
    format: query.format ?? 'svg',
    size: query.size ?? QR_SIZE.default,
    margin: query.margin ?? QR_MARGIN.default,
    level: query.level ?? 'M',
    color: parseColor(query.color ?? '000000'),
    background: parseColor(query.background ?? 'ffffff'),
  }
  const ratio = contrastRatio(options.color, options.background)
  if (ratio < MIN_CONTRAST) {
    const message = `has too little contrast with the other colour to be scanned (${ratio.toFixed(2)}:1 on white paper; at least ${MIN_CONTRAST}:1)`
    const errors: FieldErrorBody[] = [
      { path: '/color', message },
      { path: '/background', message },
    ]
    throw validationFailed(errors)
  }
  return options
}

const hex = ({ r, g, b, a }: Rgba) => [r, g, b, a].map((value) => value.toString(16).padStart(2, '0')).join('')

/**
 * A strong ETag from what determines the image (the text and the options), so a client or cache that has it
 * gets a 304 before anything is drawn.
 */
export function qrEtag(text: string, options: QrOptions): string {
  const key = [DRAWING_VERSION, text, options.format, options.size, options.margin, options.level, hex(options.color), hex(options.background)]
  return `"${createHash('sha256').update(key.join('\n')).digest('base64url').slice(0, 27)}"`
}

/**
 * Where the code sits in the image. Every module is the same whole number of pixels: modules of uneven widths
 * (some a pixel wider than others, as scaling to any size gives) are misread by scanners at two or three pixels
 * a module. The code is centred; the pixels left over widen the quiet zone beyond `margin` modules.
 */
function layout(size: number, modules: number, margin: number): { pixelsPerModule: number; offset: number } {
  const pixelsPerModule = Math.floor(size / (modules + 2 * margin))
  return { pixelsPerModule, offset: Math.floor((size - pixelsPerModule * modules) / 2) }
}

function drawPng(matrix: QRCode.BitMatrix, options: QrOptions): Buffer {
  const { size, margin } = options
  const modules = matrix.size
  const { pixelsPerModule, offset } = layout(size, modules, margin)
  /** The module a pixel column (or row) falls in; -1 in the quiet zone. */
  const moduleAt = (pixel: number) => {
    const module = Math.floor((pixel - offset) / pixelsPerModule)
    return pixel >= offset && module < modules ? module : -1
  }
  const stride = Math.ceil(size / 8)
  const light = Buffer.alloc(stride)
  const rows = new Map<number, Buffer>()
  const rowOfModule = (row: number): Buffer => {
    if (row < 0) return light
    let packed = rows.get(row)
    if (!packed) {
      packed = Buffer.alloc(stride)
      for (let x = 0; x < size; x++) {
        const column = moduleAt(x)
        if (column >= 0 && matrix.get(row, column)) packed[x >> 3] |= 0x80 >> (x & 7)
      }
      rows.set(row, packed)
    }
    return packed
  }
  return twoColourPng(size, size, [options.background, options.color], (y) => rowOfModule(moduleAt(y)))
}

const svgColor = (attribute: string, { r, g, b, a }: Rgba) =>
  `${attribute}="#${hex({ r, g, b, a: 0 }).slice(0, 6)}"` + (a < 255 ? ` ${attribute}-opacity="${(a / 255).toFixed(3)}"` : '')

/** One rectangle per run of dark modules in a row, in pixels laid out as the PNG's (layout above). */
function drawSvg(matrix: QRCode.BitMatrix, options: QrOptions): Buffer {
  const { size, margin } = options
  const modules = matrix.size
  const { pixelsPerModule: unit, offset } = layout(size, modules, margin)
  let path = ''
  for (let row = 0; row < modules; row++) {
    for (let column = 0; column < modules; column++) {
      if (!matrix.get(row, column)) continue
      let run = 1
      while (column + run < modules && matrix.get(row, column + run)) run++
      path += `M${offset + column * unit} ${offset + row * unit}h${run * unit}v${unit}h-${run * unit}z`
      column += run
    }
  }
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}" viewBox="0 0 ${size} ${size}" shape-rendering="crispEdges">` +
    `<rect width="${size}" height="${size}" ${svgColor('fill', options.background)}/>` +
    `<path ${svgColor('fill', options.color)} d="${path}"/></svg>\n`
  return Buffer.from(svg)
}

/** The modules of a code, encoded but not drawn yet. */
export type QrMatrix = QRCode.BitMatrix

/**
 * The modules of the QR code of `text`; a 400 naming /size when the image would give a module less than a pixel
 * (a long address at a high level with a wide margin does not fit in 64 pixels).
 */
export function encodeQr(text: string, options: QrOptions): QrMatrix {
  const matrix = QRCode.create(text, { errorCorrectionLevel: options.level }).modules
  const least = matrix.size + 2 * options.margin
  if (options.size < least) {
    throw validationFailed([
      {
        path: '/size',
        message: `must be at least ${least} for this link at level ${options.level} with a margin of ${options.margin} (one pixel per module)`,
      },
    ])
  }
  return matrix
}

export function drawQr(matrix: QrMatrix, options: QrOptions): QrImage {
  return options.format === 'png'
    ? { contentType: 'image/png', body: drawPng(matrix, options) }
    : { contentType: 'image/svg+xml', body: drawSvg(matrix, options) }
}
