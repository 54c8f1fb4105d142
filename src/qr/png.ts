/**
 * A minimal PNG writer for two-colour images: palette colour type, one bit per pixel. A QR code has two colours,
 * so a 2048-pixel code is 0.5 MB before compression instead of the 16 MB of RGBA that general encoders (pngjs,
 * which the qrcode package uses) fill and filter pixel by pixel; the transparency of either colour goes in a
 * tRNS chunk. Only what the PNG specification requires is written: IHDR, PLTE, tRNS when needed, IDAT, IEND.
 */
import { deflateSync } from 'node:zlib'

export interface Rgba {
  r: number
  g: number
  b: number
  /** 0 (transparent) to 255 (opaque). */
  a: number
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

// zlib.crc32 arrives only in Node 20.15; the service supports 20.10.
const CRC_TABLE = new Int32Array(256).map((_, n) => {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
  return c
})

function crc32(data: Buffer): number {
  let crc = -1
  for (let index = 0; index < data.length; index++) crc = CRC_TABLE[(crc ^ data[index]) & 0xff] ^ (crc >>> 8)
  return (crc ^ -1) >>> 0
}

function chunk(type: string, data: Buffer): Buffer {
  const typed = Buffer.concat([Buffer.from(type, 'latin1'), data])
  const length = Buffer.alloc(4)
  length.writeUInt32BE(data.length)
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(typed))
  return Buffer.concat([length, typed, crc])
}

/**
 * A `width` × `height` image whose pixel (x, y) has `palette[dark(x, y) ? 1 : 0]`. `rowOf(y)` returns the packed
 * row (one bit per pixel, most significant first, ceil(width / 8) bytes): rows repeat within a module, so the
 * caller hands back the same buffer for each of them.
 */
export function twoColourPng(width: number, height: number, palette: [Rgba, Rgba], rowOf: (y: number) => Buffer): Buffer {
  const header = Buffer.alloc(13)
  header.writeUInt32BE(width, 0)
  header.writeUInt32BE(height, 4)
  header[8] = 1 // bit depth
  header[9] = 3 // colour type: palette
  // bytes 10-12: deflate compression, adaptive filtering, no interlace (all 0)
  const stride = Math.ceil(width / 8)
  const raw = Buffer.alloc((stride + 1) * height) // each row starts with its filter type, 0 (none)
  for (let y = 0; y < height; y++) rowOf(y).copy(raw, y * (stride + 1) + 1, 0, stride)
  const parts = [
    SIGNATURE,
    chunk('IHDR', header),
    chunk('PLTE', Buffer.from(palette.flatMap(({ r, g, b }) => [r, g, b]))),
  ]
  if (palette.some(({ a }) => a < 255)) parts.push(chunk('tRNS', Buffer.from(palette.map(({ a }) => a))))
  parts.push(chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0)))
  return Buffer.concat(parts)
}
