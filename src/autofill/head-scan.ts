/**
 * A page's head read with a real HTML tokenizer (htmlparser2's streaming parser), never by searching the text:
 * a `</head>` or `charset=` inside a comment, a script or an attribute value is not markup.
 *
 * - HeadEnd finds where the head ends while the bytes arrive: at `</head>`, or at `<body>` when a minified page
 *   leaves `</head>` out. Not at the first element a head cannot hold, as a browser would: heads hold
 *   `<noscript><img>` (the Meta pixel's snippet), `<noscript><iframe>` (Google Tag Manager's) and more before their
 *   open-graph tags, and those tags are what the page means to publish.
 * - headTags keeps only the tags autofill reads (the first <title>, the meta tags of open graph, twitter and the
 *   description, the icon links), as a small document: open-graph-scraper then parses that instead of up to
 *   AUTOFILL_MAX_BYTES of head, which held the event loop for seconds with a head of thousands of other tags.
 * - metaCharset reads the charset a `<meta>` declares.
 *
 * Tags are recognised in bytes read as latin1 (one character per byte) too: the markup of the charsets pages
 * use is ASCII either way.
 */
import { Parser } from 'htmlparser2'
import { setImmediate as nextTurn } from 'node:timers/promises'

/** Finds where the head ends in text written to it a piece at a time. */
export class HeadEnd {
  /** Where the head ends, as an offset into everything written; -1 until known. */
  end = -1
  private readonly parser: Parser

  constructor() {
    this.parser = new Parser(
      {
        onopentagname: (name) => {
          if (this.end < 0 && name === 'body') this.end = this.parser.startIndex
        },
        onclosetag: (name, isImplied) => {
          if (this.end < 0 && name === 'head') this.end = isImplied ? this.parser.startIndex : this.parser.endIndex + 1
        },
      },
      { decodeEntities: false },
    )
  }

  /** Reads more of the page; answers `end`. */
  write(text: string): number {
    if (this.end < 0) this.parser.write(text)
    return this.end
  }
}

/** Tags kept for open-graph-scraper: enough for every field, few enough to cost nothing to parse. */
const MAX_META_TAGS = 200
const MAX_ICON_LINKS = 20
/** Text handed to the parser in one go, so that a large head never holds the event loop long. */
const SLICE = 64 * 1024
/**
 * The most of a kept value (an attribute, the title's text), in code units: more than an address the link fields
 * take (MAX_URL_LENGTH) and than a description of 2,048 characters. A page's megabyte-long og:title otherwise went
 * whole to the scraper and the text clean-up, which held the event loop for a third of a second a page. A longer
 * value has its runs of white space and control characters made one space first (as the text clean-up does), so
 * that what is cut is text; an address that long could not be stored anyway.
 */
export const MAX_KEPT_VALUE = 4 * 1024 + 64
/**
 * The most of the kept document, which the scraper parses twice in one go (some 40 ms at this size). Tags past
 * it are not kept, none of them, so that a tag kept never loses to a later one of lower precedence that happened
 * to be shorter: like AUTOFILL_MAX_BYTES for the head, a bound on what is read.
 */
export const MAX_KEPT_TOTAL = 128 * 1024

/** `value` cut to MAX_KEPT_VALUE code units (spaces collapsed first), never in the middle of a surrogate pair. */
function bounded(value: string): string {
  if (value.length <= MAX_KEPT_VALUE) return value
  const cut = value.replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, ' ').slice(0, MAX_KEPT_VALUE)
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut
}

const isReadMeta = (key: string) => key.startsWith('og:') || key.startsWith('twitter:') || key === 'description'
/** What names a meta, as open-graph-scraper reads them (an empty `property` does not hide a `name`). */
const metaKey = (attributes: Record<string, string>) =>
  (attributes.property?.trim() || attributes.name?.trim() || attributes.itemprop?.trim() || '').toLowerCase()

const escapeAttribute = (value: string) => value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;')
const escapeText = (value: string) => value.replace(/&/g, '&amp;').replace(/</g, '&lt;')
const tag = (name: string, attributes: Record<string, string>, keep: string[]) =>
  `<${name}${keep.filter((key) => key in attributes).map((key) => ` ${key}="${escapeAttribute(bounded(attributes[key]))}"`).join('')}>`

/**
 * The tags of the page's head that autofill reads, as a small HTML document, and the addresses of its icon links
 * in page order (the scraper names one; autofill tries each, as it does the images).
 */
export async function headTags(html: string): Promise<{ html: string; icons: string[] }> {
  const kept: string[] = []
  const icons: string[] = []
  let keptLength = 0
  let full = false
  const keep = (markup: string) => {
    if (full || keptLength + markup.length > MAX_KEPT_TOTAL) {
      full = true
      return false
    }
    kept.push(markup)
    keptLength += markup.length
    return true
  }
  let title: string | undefined
  let titleText: string[] | null = null
  let metas = 0
  let ended = false
  // A <title> inside an inline <svg> (a sprite) names the drawing, not the page.
  let svgDepth = 0
  const parser = new Parser({
    onopentag: (name, attributes) => {
      if (ended) return
      if (name === 'body') ended = true
      else if (name === 'svg') svgDepth++
      else if (name === 'title' && title === undefined && svgDepth === 0) titleText = []
      else if (name === 'meta' && metas < MAX_META_TAGS && isReadMeta(metaKey(attributes))) {
        metas++
        keep(tag('meta', attributes, ['property', 'name', 'itemprop', 'content', 'value']))
      } else if (name === 'link' && icons.length < MAX_ICON_LINKS && /\bicon\b/i.test(attributes.rel ?? '')) {
        if (keep(tag('link', attributes, ['rel', 'href', 'sizes', 'type']))) icons.push(bounded(attributes.href ?? ''))
      }
    },
    // The whole title (the head is AUTOFILL_MAX_BYTES at most): bounded below, once its spaces are collapsed.
    ontext: (text) => titleText?.push(text),
    onclosetag: (name) => {
      if (name === 'head') ended = true
      if (name === 'svg' && svgDepth > 0) svgDepth--
      if (name === 'title' && titleText) {
        title = bounded(titleText.join(''))
        titleText = null
      }
    },
  })
  for (let start = 0; start < html.length && !ended; start += SLICE) {
    if (start > 0) await nextTurn()
    parser.write(html.slice(start, start + SLICE))
  }
  if (!ended) parser.end()
  const titleTag = title === undefined ? '' : `<title>${escapeText(title)}</title>`
  return { html: `<!doctype html><html><head>${titleTag}${kept.join('')}</head><body></body></html>`, icons }
}

/** `<meta charset="x">` or `<meta http-equiv="Content-Type" content="…; charset=x">`: the first one's label. */
export function metaCharset(text: string, charsetOf: (contentType: string) => string | undefined): string | undefined {
  let label: string | undefined
  const parser = new Parser({
    onopentag: (name, attributes) => {
      if (label !== undefined || name !== 'meta') return
      if (attributes.charset !== undefined) label = attributes.charset.trim().toLowerCase() || undefined
      else if (attributes['http-equiv']?.trim().toLowerCase() === 'content-type') label = charsetOf(attributes.content ?? '')
    },
  })
  parser.write(text)
  parser.end()
  return label
}
