import { Type, type Static } from '@sinclair/typebox'
import { StringEnum } from './enum.js'

export const FieldError = Type.Object(
  {
    path: Type.String({ description: 'JSON pointer of the offending field', examples: ['/link/url'] }),
    message: Type.String({ examples: ['must be an absolute http(s) URL'] }),
  },
  { $id: 'FieldError' },
)

export const ErrorCode = StringEnum(
  [
    'invalid_json',
    'validation_failed',
    'redirect_loop',
    'slug_reserved',
    'unauthorized',
    'domain_reserved',
    'domain_not_allowed',
    'not_found',
    'slug_taken',
    // Idempotency-Key (src/errors/idempotency-errors.ts): the key's first request is in progress; or it was another request.
    'idempotency_key_in_use',
    'idempotency_key_reused',
    'name_taken',
    'folder_not_empty',
    'pixel_exists',
    'payload_too_large',
    'unsupported_media_type',
    'rate_limited',
    'unavailable',
    'internal',
    // The HTTP exchange itself (src/errors/http-errors.ts): a request the server cannot read, or too slow.
    'bad_request',
    'request_timeout',
    'uri_too_long',
    'expectation_failed',
    'headers_too_large',
  ],
  { description: 'What went wrong, for programs: the same for every answer of a kind' },
)

/** RFC 9457 problem details, with a machine-readable `code` and, for bad input, the fields at fault. */
export const Problem = Type.Object(
  {
    type: Type.String({ examples: ['about:blank'] }),
    title: Type.String({ examples: ['Bad Request'] }),
    status: Type.Integer({ examples: [400] }),
    code: ErrorCode,
    detail: Type.String({ examples: ['link/url must be an absolute http(s) URL'] }),
    errors: Type.Optional(Type.Array(Type.Ref(FieldError), { description: 'For bad input: each offending field' })),
  },
  { $id: 'Problem', description: 'An error, served as application/problem+json' },
)

export type ProblemBody = Static<typeof Problem>
export type FieldErrorBody = Static<typeof FieldError>
export type ErrorCodeName = Static<typeof ErrorCode>
