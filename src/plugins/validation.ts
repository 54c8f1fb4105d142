import { Ajv, type ErrorObject, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifyInstance, FastifySchema } from 'fastify'
import fp from 'fastify-plugin'
import { customFormats, formatMessages, patternMessages } from '../../schemas/formats.js'
import type { FieldErrorBody } from '../../schemas/problem.js'
import { validationFailed } from '../errors/app-error.js'

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
type AddFormats = (ajv: Ajv) => Ajv
const addFormats: AddFormats =
  (addFormatsModule as unknown as { default: AddFormats }).default ?? (addFormatsModule as unknown as AddFormats)

function buildAjv(options: Options): Ajv {
  const ajv = new Ajv({ strict: false, useDefaults: true, ...options })
  addFormats(ajv)
  for (const [name, check] of Object.entries(customFormats)) ajv.addFormat(name, { type: 'string', validate: check })
  return ajv
}

/**
 * Bodies are validated strictly (no type coercion: a title of 5 is an error, not "5") and report every
 * offending field at once; `verbose` keeps each failing schema so errors can be explained. Path and
 * query parameters arrive as text, so their validator coerces.
 */
const bodyAjv = buildAjv({ coerceTypes: false, allErrors: true, verbose: true })
const parameterAjv = buildAjv({ coerceTypes: 'array', removeAdditional: true })

/** JSON pointers of the strings in `value` that hold a NUL character, which PostgreSQL text cannot store. */
export function pathsWithNul(value: unknown, path = ''): string[] {
  if (typeof value === 'string') return value.includes('\u0000') ? [path] : []
  if (Array.isArray(value)) return value.flatMap((item, index) => pathsWithNul(item, `${path}/${index}`))
  if (value && typeof value === 'object') {
    return Object.entries(value).flatMap(([key, item]) => pathsWithNul(item, `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`))
  }
  return []
}

export default fp(async function validation(app: FastifyInstance) {
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? bodyAjv.compile(schema) : parameterAjv.compile(schema),
  )
  // A NUL would pass every schema and then fail in the database as a 500: refuse it here, for every body.
  app.addHook('preValidation', async (request) => {
    const paths = pathsWithNul(request.body)
    if (paths.length > 0) throw validationFailed(paths.map((path) => ({ path, message: 'must not contain NUL characters' })))
  })
})

export type { FastifySchema }

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
      return formatMessages[error.params.format] ?? `must match format "${error.params.format}"`
    case 'pattern':
      return patternMessages[error.params.pattern] ?? `must match the pattern ${error.params.pattern}`
    case 'type':
      return `must be ${describeSchema({ type: error.params.type }).join(' or ')}`
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

/**
 * Turns AJV's errors into one message per offending field. A union (anyOf) reports a failure for each of
 * its branches; when the value had the type of one branch, that branch's errors are the useful ones
 * ("/link/pixels/0/platform must be one of …"), otherwise the union is described as a whole
 * ("/link/folderId must be an integer, a string of digits or null").
 */
export function fieldErrors(errors: ErrorObject[], prefix = ''): FieldErrorBody[] {
  let pending: PendingError[] = errors
    .filter((error) => error.keyword !== 'anyOf')
    .map((error) => ({
      path: prefix + error.instancePath + (error.keyword === 'required' ? `/${error.params.missingProperty}` : ''),
      message: messageOf(error),
      schemaPath: error.schemaPath,
      typeMismatch: error.keyword === 'type' || error.keyword === 'const',
    }))

  const unions = errors
    .filter((error) => error.keyword === 'anyOf')
    .sort((a, b) => b.schemaPath.length - a.schemaPath.length)
  for (const union of unions) {
    const branchPrefix = union.schemaPath + '/'
    const path = prefix + union.instancePath
    // The same union can fail at several places (each element of an array): only this place's errors count.
    const isInside = (error: PendingError) =>
      error.schemaPath.startsWith(branchPrefix) && (error.path === path || error.path.startsWith(path + '/'))
    const inside = pending.filter(isInside)
    const outside = pending.filter((error) => !isInside(error))
    const branches = new Map<string, PendingError[]>()
    for (const error of inside) {
      const branch = error.schemaPath.slice(branchPrefix.length).split('/')[0]
      branches.set(branch, [...(branches.get(branch) ?? []), error])
    }
    // A branch the value's type fitted either failed on something other than its type, or failed deeper
    // inside (an object whose property is wrong).
    const matched = [...branches.values()].find((branch) =>
      branch.some((error) => !error.typeMismatch || error.path.length > path.length),
    )
    const kinds = describeSchema(union.parentSchema as SchemaNode)
    const allConstants = (union.parentSchema as SchemaNode).anyOf instanceof Array && kinds.every((kind) => kind.startsWith('"'))
    const summary: PendingError = {
      path,
      message: allConstants
        ? `must be one of: ${kinds.map((kind) => JSON.parse(kind)).join(', ')}`
        : `must be ${kinds.slice(0, -1).join(', ')}${kinds.length > 1 ? ' or ' : ''}${kinds.at(-1)}`,
      schemaPath: union.schemaPath,
      typeMismatch: true,
    }
    pending = [...outside, ...(matched ?? [summary])]
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
