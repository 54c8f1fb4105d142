/** POST /v1/links/bulk: many creates in one request, each answered on its own (src/links/link-bulk.ts). */
import { Type, type Static } from '@sinclair/typebox'
import { LinkInput, LinkRecord } from './link.js'
import { Problem } from './problem.js'

/** The most links one bulk request may carry. */
export const MAX_BULK_LINKS = 100

export const BulkCreateBody = Type.Object(
  {
    links: Type.Array(Type.Ref(LinkInput), {
      minItems: 1,
      maxItems: MAX_BULK_LINKS,
      description:
        'The links to create, each under the rules of createLink. Each is checked on its own: a bad one is answered ' +
        'in its place in `results` and never fails the others.',
    }),
    autofill: Type.Optional(
      Type.Boolean({
        default: true,
        description: 'As for createLink, for every link of the request.',
      }),
    ),
  },
  {
    examples: [
      {
        links: [
          { url: 'https://example.com/summer-sale', id: 'summer', tags: ['summer'] },
          { url: 'https://example.com/winter-sale' },
        ],
        autofill: false,
      },
    ],
  },
)

export const BulkCreateResult = Type.Object(
  {
    results: Type.Array(
      Type.Object(
        {
          status: Type.Integer({
            description: "What a createLink of this link alone would have answered: 201, or the problem's status",
            examples: [201],
          }),
          link: Type.Optional(Type.Ref(LinkRecord, { description: 'The stored link (status 201)' })),
          problem: Type.Optional(
            Type.Ref(Problem, {
              description: 'Why this link was not created; field errors name it by its place: /links/3/url',
            }),
          ),
        },
        { description: 'One link: `link` when it was created, else `problem`' },
      ),
      { description: 'One result per link of the request, in the same order' },
    ),
  },
  {
    $id: 'BulkCreateResult',
    description: 'The result of each link of a bulk create, in the order of the request',
    examples: [
      {
        results: [
          {
            status: 409,
            problem: {
              type: 'about:blank',
              title: 'Conflict',
              status: 409,
              code: 'slug_taken',
              detail: 'go.brand.com/summer is already taken',
            },
          },
          {
            status: 400,
            problem: {
              type: 'about:blank',
              title: 'Bad Request',
              status: 400,
              code: 'validation_failed',
              detail: 'links/1/url must be an absolute http(s) URL',
              errors: [{ path: '/links/1/url', message: 'must be an absolute http(s) URL' }],
            },
          },
        ],
      },
    ],
  },
)

export type BulkCreateRequest = Static<typeof BulkCreateBody>
export type BulkCreateResultBody = Static<typeof BulkCreateResult>
