/**
 * AJV's errors as the client sees them: one message per offending field, by JSON pointer. The work is
 * linear in the number of AJV errors (an array of invalid elements fails once per element).
 */
import type { ErrorObject } from 'ajv'
import { formatMessages, httpUrlProblem, patternMessages } from '../../schemas/formats.js'
import type { FieldErrorBody } from '../../schemas/problem.js'

type SchemaNode = Record<string, unknown>

/** A phrase for the values a schema accepts: "an integer", "a string of digits", "null"… */
function describeSchema(schema: SchemaNode): string[] {
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as SchemaNode[]).flatMap(describeSchema)
  if ('const' in schema) return [JSON.stringify(schema.const)]
  switch (schema.type) {
    case 'string':
      if (typeof schema.format === 'string' && formatMessages[schema.format])
        return [formatMessages[schema.format].replace(/^must be /, '')]
      if (typeof schema.pattern === 'string' && patternMessages[schema.pattern]?.startsWith('must be '))
        return [patternMessages[schema.pattern].replace(/^must be /, '')]
      return ['a string']
    case 'integer':
      return ['an integer']
    case 'number':
      return ['a number']
    case 'boolean':
      return ['a boolean']
    case 'array':
      return ['an array']
    case 'object':
      return ['an object']
    case 'null':
      return ['null']
    default:
      return ['a valid value']
  }
}

function messageOf(error: ErrorObject): string {
  switch (error.keyword) {
    case 'required':
      return 'is required'
    case 'format':
      // A URL can fail for a reason of its own (credentials); verbose mode gives the value to tell.
      if (error.params.format === 'http-url' && typeof error.data === 'string') {
        return httpUrlProblem(error.data) ?? formatMessages['http-url']
      }
      return formatMessages[error.params.format] ?? `must match format "${error.params.format}"`
    case 'pattern':
      return patternMessages[error.params.pattern] ?? `must match the pattern ${error.params.pattern}`
    case 'type':
      return `must be ${describeSchema({ type: error.params.type }).join(' or ')}`
    case 'enum':
      return `must be one of: ${(error.params.allowedValues as unknown[]).join(', ')}`
    default:
      return error.message ?? 'is invalid'
  }
}

interface PendingError {
  path: string
  message: string
  schemaPath: string
  /** True when the value had the wrong type (or constant): another union branch may explain it better. */
  typeMismatch: boolean
}

function toPending(error: ErrorObject, prefix: string): PendingError {
  return {
    path: prefix + error.instancePath + (error.keyword === 'required' ? `/${error.params.missingProperty}` : ''),
    message: messageOf(error),
    schemaPath: error.schemaPath,
    typeMismatch: error.keyword === 'type' || error.keyword === 'const',
  }
}

/** The one message for a union none of whose branches fitted the value's type. */
function unionSummary(union: ErrorObject, path: string): PendingError {
  const kinds = describeSchema(union.parentSchema as SchemaNode)
  const allConstants = (union.parentSchema as SchemaNode).anyOf instanceof Array && kinds.every((kind) => kind.startsWith('"'))
  return {
    path,
    message: allConstants
      ? `must be one of: ${kinds.map((kind) => JSON.parse(kind)).join(', ')}`
      : `must be ${kinds.slice(0, -1).join(', ')}${kinds.length > 1 ? ' or ' : ''}${kinds.at(-1)}`,
    schemaPath: union.schemaPath,
    typeMismatch: true,
  }
}

/**
 * Turns AJV's errors into one message per offending field. A union (anyOf) reports a failure for each of
 * its branches; when the value had the type of one branch, that branch's errors are the useful ones
 * ("/link/pixels/0/platform must be one of …"), otherwise the union is described as a whole
 * ("/link/folderId must be an integer, a string of digits or null").
 *
 * AJV reports a union's failure right after the errors of its branches, so those are the errors at the end
 * of the list collected so far: each union takes them off the end and puts back its verdict, which a union
 * around it then sees in turn. Every error is handled a bounded number of times, so the whole is linear
 * (filtering the whole list for each union made an array of invalid elements cost its length squared).
 */
export function fieldErrors(errors: ErrorObject[], prefix = ''): FieldErrorBody[] {
  const pending: PendingError[] = []
  for (const error of errors) {
    // An if/then failure only repeats the errors of its "then" (src/plugins/validation.ts, boundArrays).
    if (error.keyword === 'if') continue
    if (error.keyword !== 'anyOf') {
      pending.push(toPending(error, prefix))
      continue
    }
    const branchPrefix = error.schemaPath + '/'
    const path = prefix + error.instancePath
    let start = pending.length
    while (
      start > 0 &&
      pending[start - 1].schemaPath.startsWith(branchPrefix) &&
      (pending[start - 1].path === path || pending[start - 1].path.startsWith(path + '/'))
    ) {
      start--
    }
    const inside = pending.splice(start)
    const branches = new Map<string, PendingError[]>()
    for (const branchError of inside) {
      const branch = branchError.schemaPath.slice(branchPrefix.length).split('/')[0]
      const list = branches.get(branch)
      if (list) list.push(branchError)
      else branches.set(branch, [branchError])
    }
    // A branch the value's type fitted either failed on something other than its type, or failed deeper
    // inside (an object whose property is wrong).
    const matched = [...branches.values()].find((branch) =>
      branch.some((branchError) => !branchError.typeMismatch || branchError.path.length > path.length),
    )
    for (const verdict of matched ?? [unionSummary(error, path)]) pending.push(verdict)
  }

  const seen = new Set<string>()
  return pending
    .filter((error) => {
      const key = `${error.path}\u0000${error.message}`
      if (seen.has(key)) return false
      seen.add(key)
      return true
    })
    .map(({ path, message }) => ({ path, message }))
}
