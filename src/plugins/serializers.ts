/**
 * Fastify's own response serializers (fast-json-stringify, through @fastify/fast-json-stringify-compiler), compiled
 * once per distinct response schema instead of once per route and status. Every route documents the same error
 * answers (src/plugins/openapi-http-answers.ts), so an app asked for about 500 serializers of which 20 differ;
 * compiling them was most of the CPU it took to build the app, and their code held memory. The service builds one
 * app, but the test suite and the benchmarks build hundreds, and they are reused across those too.
 *
 * A serializer is compiled from its schema, the named schemas (addSchema) and the serializer options, nothing
 * else: two schemas with the same JSON under the same named schemas and options get the same function. (Options
 * holding functions would not be told apart by their JSON; Fastify is given none.)
 */
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler'

type SerializerFactory = ReturnType<typeof SerializerSelector>
type Serialize = (data: unknown) => string

const defaultFactory: SerializerFactory = SerializerSelector()
/** By the JSON of the named schemas and options, then of the response schema. Route schemas are few and fixed. */
const compiled = new Map<string, Map<string, Serialize>>()

export const sharedSerializers: SerializerFactory = (externalSchemas, serializerOptions) => {
  const compile = defaultFactory(externalSchemas, serializerOptions)
  const context = JSON.stringify([externalSchemas ?? null, serializerOptions ?? null])
  const bySchema = compiled.get(context) ?? new Map<string, Serialize>()
  compiled.set(context, bySchema)
  return (route) => {
    const key = JSON.stringify(route.schema ?? null)
    let serialize = bySchema.get(key)
    if (!serialize) {
      serialize = compile(route) as Serialize
      bySchema.set(key, serialize)
    }
    return serialize
  }
}
