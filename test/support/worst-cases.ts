/**
 * Bodies that cost validation the most per byte (issue 9, item 17): an array field of a link filled up to the
 * body limit with elements that all fail, each in its own way. The robustness test sends them and asserts a
 * bounded 400; bench/validation.ts times them.
 */
import { BODY_LIMIT } from '../../src/plugins/errors.js'

export const WORST_CASES: { field: string; element: unknown }[] = [
  { field: 'pixels', element: 1 },
  { field: 'pixels', element: {} },
  { field: 'pixels', element: { platform: 1, value: 1, title: 1 } },
  { field: 'pixels', element: 'x' },
  { field: 'extraOptionsGeolocations', element: 1 },
  { field: 'extraOptionsGeolocations', element: {} },
  { field: 'extraOptionsLinkRotator', element: {} },
  { field: 'extraOptionsLinkRotator', element: { url: 1, value: true } },
  { field: 'tags', element: 1 },
  { field: 'tags', element: {} },
  { field: 'linkScripts', element: 'a' },
  { field: 'linkScripts', element: 0 },
]

/** `{"link":{…base, field: [element, element, …]}}`, as close under `limit` bytes as the element allows. */
export function worstCaseBody(field: string, element: unknown, base: Record<string, unknown> = {}, limit = BODY_LIMIT): string {
  const empty = JSON.stringify({ link: { ...base, [field]: [] } })
  const item = JSON.stringify(element)
  const count = Math.floor((limit - empty.length + 1) / (item.length + 1))
  return empty.replace(/\[\]\}\}$/, `[${Array(count).fill(item).join(',')}]}}`)
}
