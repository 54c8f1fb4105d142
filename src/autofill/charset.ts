/**
 * Decodes a page's bytes the way a browser picks the encoding (the HTML standard, simplified): a byte
 * order mark, else the charset of the Content-Type header, else a `<meta charset>` or `<meta http-equiv
 * content-type>` near the top, else UTF-8. Any label the WHATWG Encoding standard knows works (Node's
 * TextDecoder has them all: ISO-8859-1, Windows-1251, Shift_JIS, EUC-KR, GBK, …); an unknown label falls
 * is skipped. Bytes that do not decode become U+FFFD, never an error.
 */

/** How far into the page a `<meta>` charset declaration is looked for (the standard says 1024 bytes; pages are sloppier). */
const META_SCAN_BYTES = 4096

import { TextDecoder } from 'node:util'

const BOMS: [number[], string][] = [
  [[0xef, 0xbb, 0xbf], 'utf-8'],
  [[0xfe, 0xff], 'utf-16be'],
  [[0xff, 0xfe], 'utf-16le'],
]

export function decodeHtml(bytes: Uint8Array, contentType: string | null): string {
  for (const [mark, encoding] of BOMS) {
    if (mark.every((byte, i) => bytes[i] === byte)) return new TextDecoder(encoding).decode(bytes.subarray(mark.length))
  }
  // A label the Encoding standard does not know is ignored, as browsers do: the next source decides.
  const decoder = knownDecoder(charsetOf(contentType ?? '')) ?? knownDecoder(metaCharset(bytes)) ?? new TextDecoder('utf-8')
  return decoder.decode(bytes)
}

function knownDecoder(label: string | undefined): TextDecoder | undefined {
  if (!label) return undefined
  try {
    return new TextDecoder(label)
  } catch {
    return undefined
  }
}

function charsetOf(contentType: string): string | undefined {
  const match = /charset\s*=\s*["']?([\w.:-]+)/i.exec(contentType)
  return match?.[1].toLowerCase()
}

/** `<meta charset="x">` or `<meta http-equiv="Content-Type" content="text/html; charset=x">` in the first bytes. */
function metaCharset(bytes: Uint8Array): string | undefined {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, META_SCAN_BYTES)).toString('latin1')
  for (const [tag] of head.matchAll(/<meta\b[^>]*>/gi)) {
    const direct = /\bcharset\s*=\s*["']?([\w.:-]+)/i.exec(tag)
    if (direct) {
      const label = direct[1].toLowerCase()
      // A page served as bytes cannot really be UTF-16 when this very tag was readable as ASCII.
      return label.startsWith('utf-16') ? 'utf-8' : label
    }
  }
  return undefined
}
