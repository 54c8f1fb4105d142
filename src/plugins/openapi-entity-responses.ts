/**
 * Response documentation the link reads, folders, pixels and scripts need beyond openapi-responses.ts: a 204
 * without a body, and error statuses whose description and examples are their own (a 404 of a folder, a 409
 * of a pixel). Examples are made by the constructors the service throws, as there.
 */
import { Type, type TSchema } from '@sinclair/typebox'
import { Problem } from '../../schemas/problem.js'
import { reservedLinkUnchangeable, tooManyRequests, type AppError } from '../errors/app-error.js'
import { PROBLEM_MEDIA_TYPE, problemResponses } from './openapi-responses.js'

/** A success without a body. `type: 'null'` lets Fastify accept the empty reply and the document show no content. */
export const noContentResponse = (description: string) => ({ description, type: 'null' }) as const

export interface ProblemCase {
  description: string
  /** One example per code: the document keys them by code. */
  examples: AppError[]
  headers?: Record<string, TSchema>
}

/** These routes have no quota (contract section 8 limits create and update): their 429 is the bad-token throttle. */
const badTokenThrottle: ProblemCase = {
  description:
    'rate_limited: more than 30 requests with a bad token came from this address within a minute; ' +
    'Retry-After says when to try again',
  examples: [tooManyRequests('Too many requests with a bad API token; wait and try again', 42)],
  headers: { 'Retry-After': Type.Integer({ minimum: 1, description: 'Seconds to wait before trying again' }) },
}

/** The 403 of an update or delete of a link on a reserved domain (src/links/domains.ts). */
export const reservedLinkWrite: ProblemCase = {
  description: 'domain_reserved: the link is on a reserved domain, which only official tokens may change or delete',
  examples: [reservedLinkUnchangeable('links.example')],
}

export function problemResponse({ description, examples, headers }: ProblemCase) {
  return {
    description,
    ...(headers ? { headers } : {}),
    content: {
      [PROBLEM_MEDIA_TYPE]: {
        schema: Type.Ref(Problem),
        examples: Object.fromEntries(examples.map((error) => [error.code, { value: error.toProblem() }])),
      },
    },
  }
}

/** The shared error responses of `statuses`, with `cases` (and the 429 above) replacing the ones that differ here. */
export function problemResponsesWith(cases: Record<number, ProblemCase>, ...statuses: number[]) {
  const specific = statuses.includes(429) ? { 429: badTokenThrottle, ...cases } : cases
  const own = Object.fromEntries(Object.entries(specific).map(([status, problem]) => [status, problemResponse(problem)]))
  return { ...problemResponses(...statuses.filter((status) => !(status in specific))), ...own }
}
