/**
 * Decodes a page's bytes the way a browser picks the encoding (the HTML standard, simplified): a byte
 * order mark, else the charset of the Content-Type header, else a `<meta charset>` or `<meta http-equiv
 * content-type>` near the top, else UTF-8. Any label the WHATWG Encoding standard knows works (ISO-8859-1,
 * Windows-1251, Shift_JIS, EUC-KR, GBK, …); an unknown label is skipped. Bytes that do not decode become
 * U+FFFD, never an error.
 *
 * Node's TextDecoder names the encoding a label stands for (the standard's table: "latin1" and "iso-8859-1"
 * mean windows-1252), and decodes the Unicode ones; iconv-lite decodes the legacy ones, because Node 20's
 * TextDecoder reads windows-1252 as ISO-8859-1 (0x80 came out as a control character, not €).
 */
import iconv from 'iconv-lite'
import { TextDecoder } from 'node:util'
import { metaCharset as declaredCharset } from './head-scan.js'

/** How far into the page a `<meta>` charset declaration is looked for (the standard says 1024 bytes; pages are sloppier). */
const META_SCAN_BYTES = 4096

type Decode = (bytes: Uint8Array) => string

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
  const decode = decoderFor(charsetOf(contentType ?? '')) ?? decoderFor(metaCharset(bytes)) ?? decoderFor('utf-8')!
  return decode(bytes)
}

function decoderFor(label: string | undefined): Decode | undefined {
  if (!label) return undefined
  let decoder: TextDecoder
  try {
    decoder = new TextDecoder(label)
  } catch {
    return undefined
  }
  const { encoding } = decoder
  if (encoding.startsWith('utf-') || !iconv.encodingExists(encoding)) return (bytes) => decoder.decode(bytes)
  return (bytes) => iconv.decode(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), encoding)
}

function charsetOf(contentType: string): string | undefined {
  const match = /charset\s*=\s*["']?([\w.:-]+)/i.exec(contentType)
  return match?.[1].toLowerCase()
}

/**
 * `<meta charset="x">` or `<meta http-equiv="Content-Type" content="text/html; charset=x">` in the first bytes:
 * the attribute itself, not `charset=` anywhere in a tag (a description may mention one).
 */
function metaCharset(bytes: Uint8Array): string | undefined {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, META_SCAN_BYTES)).toString('latin1')
  const label = declaredCharset(head, charsetOf)
  // A page served as bytes cannot really be UTF-16 when this very tag was readable as ASCII.
  return label?.startsWith('utf-16') ? 'utf-8' : label
}
