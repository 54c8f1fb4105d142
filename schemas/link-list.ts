/** GET /v1/links: the filters and page of the list, and its answer. */
import { Type, type Static } from '@sinclair/typebox'
import { MAX_ROW_ID } from './formats.js'
import { LIMITS, LinkRecord } from './link.js'

export const LIST_LIMIT = { default: 20, max: 100 } as const

export const ListLinksQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: LIST_LIMIT.max,
      default: LIST_LIMIT.default,
      description: `Links per page, 1 to ${LIST_LIMIT.max}`,
    }),
  ),
  cursor: Type.Optional(
    Type.String({
      maxLength: 200,
      description: 'The nextCursor of the previous page, as it was given; omit it for the first page',
      examples: ['eyJ1Ijo0Mn0'],
    }),
  ),
  domain: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'Only links on this short domain' })),
  folderId: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_ROW_ID, description: 'Only links in this folder' })),
  tag: Type.Optional(
    // No minLength: an empty tag is refused with the blank ones, naming /tag (src/links/link-input.ts, tagFilterKeys).
    Type.Array(Type.String({ maxLength: LIMITS.tag }), {
      maxItems: LIMITS.tags,
      description: 'Only links that have this tag, ignoring case; repeat it (tag=a&tag=b) for links that have all of them',
    }),
  ),
  q: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'Only links whose slug, url, title or note contains this text, ignoring case',
    }),
  ),
  createdAfter: Type.Optional(
    Type.String({
      format: 'date-time',
      description: 'Only links created at or after this instant (inclusive; ISO 8601 with offset)',
      examples: ['2026-11-01T00:00:00Z'],
    }),
  ),
  createdBefore: Type.Optional(
    Type.String({
      format: 'date-time',
      description:
        'Only links created before this instant (exclusive), so that consecutive windows neither overlap nor leave gaps',
      examples: ['2026-12-01T00:00:00Z'],
    }),
  ),
})

export const LinkList = Type.Object(
  {
    links: Type.Array(Type.Ref(LinkRecord), { description: 'Newest first' }),
    nextCursor: Type.Union([Type.String(), Type.Null()], {
      description: 'Pass it as cursor for the next page; null on the last page',
    }),
  },
  {
    $id: 'LinkList',
    description:
      'A page of links, newest first. Paging is by position, so links created while a client pages never repeat ' +
      'a link or skip one that existed when paging began.',
    examples: [{ links: LinkRecord.examples, nextCursor: 'eyJ1Ijo0Mn0' }],
  },
)

export type ListLinksRequest = Static<typeof ListLinksQuery>
export type LinkListBody = Static<typeof LinkList>
