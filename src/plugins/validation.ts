import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifyInstance, FastifySchema, preValidationHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { COMPONENT_SCHEMAS } from '../../schemas/components.js'
import { customFormats, NOT_DECIMAL_MESSAGE } from '../../schemas/formats.js'
import { validationFailed } from '../errors/app-error.js'
import { clientDataProblems, queryEncodingProblems } from './client-data.js'

import { fieldErrors } from './field-errors.js'
export { fieldErrors }

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
// `verbose` here too: a parameter that fits no branch of a union (format=gif) is explained from the union's schema.
const parameterAjv = buildAjv({ coerceTypes: 'array', removeAdditional: true, verbose: true })

type SchemaNode = Record<string, unknown>

const components = new Map<string, SchemaNode>(COMPONENT_SCHEMAS.map((schema) => [schema.$id, schema as SchemaNode]))
const inlinedSchemas = new WeakMap<object, unknown>()

/**
 * The schema with each reference to a named schema (`{"$ref": "LinkInput"}`) replaced by that schema, without
 * its `$id`. The document names the schemas; the validators check exactly what they checked when the schemas
 * were written in place: the same errors, with the same schema paths, which src/plugins/field-errors.ts reads
 * to explain a union. Cached per schema, like boundArrays.
 */
export function inlineRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(inlineRefs)
  if (!schema || typeof schema !== 'object') return schema
  const cached = inlinedSchemas.get(schema)
  if (cached) return cached
  const { $ref, ...rest } = schema as SchemaNode
  const target = typeof $ref === 'string' ? components.get($ref) : undefined
  let inlined: SchemaNode
  if (target) {
    // (inlineRefs takes the target's $id off.) Keywords beside the reference (a description) stay.
    inlined = { ...(inlineRefs(target) as SchemaNode), ...(inlineRefs(rest) as SchemaNode) }
  } else {
    inlined = {}
    for (const [key, value] of Object.entries(schema)) inlined[key] = inlineRefs(value)
    // A named schema written in place (Type.Object(LinkInput.properties…)) is checked without its name.
    if (typeof inlined.$id === 'string' && components.has(inlined.$id)) delete inlined.$id
  }
  inlinedSchemas.set(schema, inlined)
  return inlined
}

const boundedSchemas = new WeakMap<object, unknown>()

/**
 * The schema as validated: an array's elements are checked only when the array is within its maxItems.
 * With allErrors, AJV would otherwise check and report every element of an array refused anyway for its
 * length (a 64 KiB body holds 30,000 of them), which is what made a small bad body cost seconds. The copy
 * is cached per schema, so a schema shared by routes stays one schema for AJV.
 */
export function boundArrays(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(boundArrays)
  if (!schema || typeof schema !== 'object') return schema
  const cached = boundedSchemas.get(schema)
  if (cached) return cached
  const copy: SchemaNode = {}
  for (const [key, value] of Object.entries(schema)) copy[key] = boundArrays(value)
  let bounded: SchemaNode = copy
  if (typeof copy.maxItems === 'number' && copy.items !== undefined) {
    const { items, ...rest } = copy
    bounded = { ...rest, if: { maxItems: copy.maxItems }, then: { items } }
  }
  boundedSchemas.set(schema, bounded)
  return bounded
}

/** What an integer parameter may look like: AJV's coercion also takes "0x10", "1e1", " 12", "+5" and "12.0". */
const DECIMAL_INTEGER = /^(0|-?[1-9][0-9]*)$/

/**
 * A parameter validator that refuses integers not written in plain decimal before AJV coerces them; the
 * rest (range, other parameters) is AJV's.
 */
function strictIntegers(schema: SchemaNode, validate: ValidateFunction): ValidateFunction {
  const properties = (schema.properties ?? {}) as Record<string, SchemaNode>
  const integers = Object.keys(properties).filter((key) => properties[key].type === 'integer')
  if (integers.length === 0) return validate
  const strict = ((data: Record<string, unknown> | null) => {
    const notDecimal: ErrorObject[] = integers
      .filter((key) => typeof data?.[key] === 'string' && !DECIMAL_INTEGER.test(data[key] as string))
      .map((key) => ({
        instancePath: `/${key}`,
        schemaPath: `#/properties/${key}/type`,
        keyword: 'decimal',
        params: {},
        message: NOT_DECIMAL_MESSAGE,
      }))
    const valid = validate(data)
    const refused = new Set(notDecimal.map((error) => error.instancePath))
    const errors = [...notDecimal, ...(validate.errors ?? []).filter((error) => !refused.has(error.instancePath))]
    strict.errors = errors.length > 0 ? errors : null
    return valid && notDecimal.length === 0
  }) as ValidateFunction
  return strict
}

/** The validator of a route's body, as the routes get it (bench/validation.ts times it alone). */
export const compileBodyValidator = (schema: object): ValidateFunction =>
  bodyAjv.compile(boundArrays(inlineRefs(schema)) as SchemaNode)

const compileParameterValidator = (schema: object): ValidateFunction => {
  const inlined = inlineRefs(schema) as SchemaNode
  return strictIntegers(inlined, parameterAjv.compile(inlined))
}

/** The body with its list of items emptied (left as it is when it holds no such list: the schema refuses it). */
function withoutItems(body: unknown, key: string): unknown {
  if (typeof body !== 'object' || body === null || !Array.isArray((body as Record<string, unknown>)[key])) return body
  return { ...body, [key]: [] }
}

export default fp(async function validation(app: FastifyInstance) {
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? compileBodyValidator(schema) : compileParameterValidator(schema),
  )
  // What no schema can say (src/plugins/client-data.ts), on the parts of the request the route declares it
  // reads (those are what reach the database) and on any body sent, a DELETE's included: a body is read like any
  // other whatever the route makes of it (README). An unknown route's path is left alone.
  // Attached only to routes that declare such a part, so routes without one (the visitor redirects) pay nothing.
  // A route whose body holds a list of items answered one by one (the bulk create) names that list in its config
  // (`bodyItems`): each item is checked by the route, a bad one failing in its own place, and the rest of the body here.
  app.addHook('onRoute', (route) => {
    const schema = route.schema
    if (!schema?.params && !schema?.querystring && !schema?.body) return
    const itemsKey = route.config?.bodyItems
    const checkClientData: preValidationHookHandler = (request, _reply, done) => {
      // Every problem listed (the 400 lists the first ones), so that none is counted again among the schema's below.
      const found = [
        ...(schema.params ? [clientDataProblems(request.params, Infinity)] : []),
        ...(schema.querystring ? [queryEncodingProblems(request.url), clientDataProblems(request.query, Infinity)] : []),
        ...(schema.body || request.body !== undefined ? [clientDataProblems(itemsKey ? withoutItems(request.body, itemsKey) : request.body, Infinity)] : []),
      ]
      const total = found.reduce((sum, { total }) => sum + total, 0)
      if (total === 0) return done()
      // The request ends here, before the schema runs: its errors are collected now, so the 400 names every
      // offending field (contract section 5), not only these. A route answering items one by one checks them itself.
      const problems = found.flatMap(({ problems }) => problems)
      const named = new Set(problems.map((problem) => problem.path))
      const parts = [['params', request.params], ['querystring', request.query], ...(itemsKey ? [] : [['body', request.body] as const])] as const
      const schemaErrors = parts.flatMap(([part, data]) => {
        const validate = schema[part] ? request.getValidationFunction(part) : undefined
        return validate && !validate(data) ? fieldErrors((validate.errors ?? []) as ErrorObject[]) : []
      }).filter((error) => !named.has(error.path))
      done(validationFailed([...problems, ...schemaErrors], total + schemaErrors.length))
    }
    route.preValidation = [checkClientData, ...[route.preValidation ?? []].flat()]
  })
})

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The member of the body that lists items a route answers one by one (see the onRoute hook above). */
    bodyItems?: string
  }
}

export type { FastifySchema }
