/**
 * Checks on what a client sent (the parsed body, the path parameters, the query) that come before any
 * schema, because no schema can say them and what they refuse would otherwise fail later, as a 500 from
 * PostgreSQL or stored mangled:
 *
 * - NUL characters, which PostgreSQL text cannot hold;
 * - lone UTF-16 surrogates (JSON's "\ud800" alone), which are no Unicode characters and have no UTF-8 form;
 * - `__proto__` and `constructor` keys, the shapes of prototype pollution, refused by name;
 * - values nested more than MAX_DEPTH levels deep.
 *
 * The walk is iterative with a stack of its own: a 64 KiB body can nest 32,000 levels deep, far beyond the
 * call stack, and it costs one visit per value (a pointer is only spelled out for a value at fault).
 */
import type { FieldErrorBody } from '../../schemas/problem.js'
import { MAX_FIELD_ERRORS } from '../errors/app-error.js'

/** Far deeper than any body of the API (a pixel's title is 4 levels down), far shallower than the call stack. */
export const MAX_DEPTH = 32

export const CLIENT_DATA_MESSAGES = {
  nul: 'must not contain NUL characters',
  loneSurrogate: 'must be valid Unicode: it holds a lone surrogate (a \\uD800-\\uDFFF escape without its pair)',
  keyNul: 'has a name with NUL characters, which is not allowed',
  keyLoneSurrogate: 'has a name that must be valid Unicode: it holds a lone surrogate',
  prototypeKey: 'is not allowed: "__proto__" and "constructor" keys are refused (prototype pollution)',
  tooDeep: `nests deeper than ${MAX_DEPTH} levels, which is not allowed`,
  queryEncoding: 'must be valid UTF-8 once percent-decoded',
} as const

const PROTOTYPE_KEYS = new Set(['__proto__', 'constructor'])

interface Entry {
  value: unknown
  depth: number
  parent: Entry | null
  /** The member name or array index under the parent; null for the root. */
  key: string | number | null
  /** Set on a member whose name is at fault: reported in document order, its value not visited. */
  keyProblem: string | undefined
}

const escapeToken = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1')

function pointer(entry: Entry): string {
  let path = ''
  for (let at: Entry | null = entry; at && at.key !== null; at = at.parent) path = `/${escapeToken(String(at.key))}${path}`
  return path
}

/** String.prototype.isWellFormed is ES2024 (Node 20 has it; this project's TypeScript lib is ES2023). */
const isWellFormed = (text: string) => (text as string & { isWellFormed(): boolean }).isWellFormed()

function textProblem(text: string, messages: { nul: string; loneSurrogate: string }): string | undefined {
  if (text.includes('\u0000')) return messages.nul
  if (!isWellFormed(text)) return messages.loneSurrogate
  return undefined
}

const KEY_MESSAGES = { nul: CLIENT_DATA_MESSAGES.keyNul, loneSurrogate: CLIENT_DATA_MESSAGES.keyLoneSurrogate }

function keyProblem(key: string): string | undefined {
  return PROTOTYPE_KEYS.has(key) ? CLIENT_DATA_MESSAGES.prototypeKey : textProblem(key, KEY_MESSAGES)
}

/** Numbers, booleans and null can hold none of these problems: they never go on the stack. */
const mayHoldProblems = (value: unknown) => typeof value === 'string' || (typeof value === 'object' && value !== null)

export interface ClientDataProblems {
  /** The first `limit` problems, by JSON pointer, in document order. */
  problems: FieldErrorBody[]
  /** How many there are in all (only the first ones are spelled out: a 400 lists no more). */
  total: number
}

/** The problems of the list above in `data`. */
export function clientDataProblems(data: unknown, limit = MAX_FIELD_ERRORS): ClientDataProblems {
  const problems: FieldErrorBody[] = []
  let total = 0
  const report = (entry: Entry, message: string) => {
    if (total++ < limit) problems.push({ path: pointer(entry), message })
  }
  const stack: Entry[] = [{ value: data, depth: 0, parent: null, key: null, keyProblem: undefined }]
  while (stack.length > 0) {
    const entry = stack.pop()!
    const { value } = entry
    if (entry.keyProblem) {
      report(entry, entry.keyProblem)
    } else if (typeof value === 'string' && entry.parent !== null) {
      // (A body that is a string is no object: the schema says so.)
      const problem = textProblem(value, CLIENT_DATA_MESSAGES)
      if (problem) report(entry, problem)
    } else if (value !== null && typeof value === 'object') {
      if (entry.depth >= MAX_DEPTH) {
        report(entry, CLIENT_DATA_MESSAGES.tooDeep)
        continue
      }
      // Children go on the stack last first, so they come off it in document order.
      const depth = entry.depth + 1
      if (Array.isArray(value)) {
        for (let index = value.length - 1; index >= 0; index--) {
          const item: unknown = value[index]
          if (mayHoldProblems(item)) stack.push({ value: item, depth, parent: entry, key: index, keyProblem: undefined })
        }
      } else {
        const keys = Object.keys(value)
        for (let index = keys.length - 1; index >= 0; index--) {
          const key = keys[index]
          const problem = keyProblem(key)
          // A member refused by its name is not visited (and value["__proto__"] would read the prototype).
          if (problem) stack.push({ value: undefined, depth, parent: entry, key, keyProblem: problem })
          else {
            const member = (value as Record<string, unknown>)[key]
            if (mayHoldProblems(member)) stack.push({ value: member, depth, parent: entry, key, keyProblem: undefined })
          }
        }
      }
    }
  }
  return { problems, total }
}

function decodeOrNull(text: string): string | null {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '))
  } catch {
    return null
  }
}

/**
 * Query parameters whose percent-encoding is not UTF-8 ("%C3", "%ED%A0%80"): Fastify's query parser keeps
 * such a value as it was sent, so `q=%C3` would be searched for literally. Named by parameter.
 */
export function queryEncodingProblems(url: string): ClientDataProblems {
  const start = url.indexOf('?')
  const problems: FieldErrorBody[] = []
  if (start < 0) return { problems, total: 0 }
  for (const pair of url.slice(start + 1).split('&')) {
    const equals = pair.indexOf('=')
    const rawKey = equals < 0 ? pair : pair.slice(0, equals)
    const key = decodeOrNull(rawKey)
    if (key === null || (equals >= 0 && decodeOrNull(pair.slice(equals + 1)) === null)) {
      problems.push({ path: `/${escapeToken(key ?? rawKey)}`, message: CLIENT_DATA_MESSAGES.queryEncoding })
    }
  }
  return { problems, total: problems.length }
}
