/**
 * The pages' escaping: a tagged template that escapes every interpolated value unless it is already
 * SafeHtml, so forgetting to escape is impossible and trusting something has to be spelled out (`raw`).
 *
 * Rules the pages keep (the tests hold them to it):
 * - attribute values are always written in double quotes, so HTML escaping covers text and attributes;
 * - a URL goes into href/src/content only through `httpUrl` (http and https only, anything else dropped);
 * - data never goes into JavaScript source: it goes into a `jsonScript` block that the page's constant
 *   script reads with JSON.parse.
 */

export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

export type HtmlValue = SafeHtml | string | number | null | undefined | false | readonly HtmlValue[]

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

/** Escapes text for an HTML text node or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => HTML_ESCAPES[character])
}

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return ''
  if (value instanceof SafeHtml) return value.value
  if (Array.isArray(value)) return value.map(render).join('')
  return escapeHtml(String(value))
}

/** `html\`<p>${text}</p>\``: every value is escaped unless it is SafeHtml; arrays are joined. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0]
  values.forEach((value, index) => {
    out += render(value) + strings[index + 1]
  })
  return new SafeHtml(out)
}

/** Markup the page itself wrote (constants, or the workspace's scripts, which are trusted by design). */
export function raw(trusted: string): SafeHtml {
  return new SafeHtml(trusted)
}

/** The URL normalised when it is an absolute http(s) URL, else null: `javascript:`, `data:` and the rest never reach a page. */
export function httpUrl(value: string | null | undefined): string | null {
  if (!value) return null
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return null
  }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null
}

/** The origin of an http(s) URL (for CSP sources), else null. */
export function httpOrigin(value: string | null | undefined): string | null {
  const url = httpUrl(value)
  return url ? new URL(url).origin : null
}

const SCRIPT_JSON_ESCAPES: Record<string, string> = {
  '<': '\\u003c',
  '>': '\\u003e',
  '&': '\\u0026',
  '\u2028': '\\u2028',
  '\u2029': '\\u2029',
}

/**
 * JSON that can sit inside a <script> element: no `<` (so no `</script>` or `<!--`), `>` or `&`, and no
 * U+2028/2029 (line terminators in older JavaScript). JSON.parse reads it back unchanged.
 */
export function jsonForScript(data: unknown): string {
  return JSON.stringify(data).replace(/[<>&\u2028\u2029]/g, (character) => SCRIPT_JSON_ESCAPES[character])
}

/** A data block the page's script reads with JSON.parse(document.getElementById(id).textContent). */
export function jsonScript(id: string, data: unknown): SafeHtml {
  return html`<script type="application/json" id="${id}">${raw(jsonForScript(data))}</script>`
}
