/**
 * A string that is one of a fixed list: `{"type": "string", "enum": [...]}`.
 *
 * TypeBox's own way (a union of literals) is an `anyOf` of single `const`s, which client generators render
 * poorly (some give up on it as "too complex") and which a query validator without `verbose` cannot explain
 * when it fails. AJV checks an `enum` directly and its error lists the allowed values
 * (src/plugins/field-errors.ts).
 */
import { Type, type SchemaOptions, type TUnsafe } from '@sinclair/typebox'

export const StringEnum = <const Values extends readonly string[]>(
  values: Values,
  options: SchemaOptions = {},
): TUnsafe<Values[number]> => Type.Unsafe<Values[number]>({ ...options, type: 'string', enum: [...values] })
