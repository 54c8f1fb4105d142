/** Click analytics (issue 11): the stats of a link or a workspace, and a link's raw visits. */
import { Type, type Static } from '@sinclair/typebox'
import { StringEnum } from './enum.js'
import { MAX_ROW_ID } from './formats.js'
import { LIMITS } from './link.js'

export const STATS_LIMIT = { default: 10, max: 100 } as const
export const VISITS_LIMIT = { default: 100, max: 1000 } as const
/** The longest range one request may ask for: a year and some, room for "this year against last year". */
export const MAX_RANGE_DAYS = 400
/** The most buckets a series may have: ask for a coarser interval or a shorter range beyond it. */
export const MAX_POINTS = 1000
export const INTERVALS = ['hour', 'day', 'week', 'month'] as const

const DateTime = (description: string) =>
  Type.String({ format: 'date-time', description, examples: ['2026-11-01T00:00:00Z'] })

const rangeFields = {
  from: Type.Optional(
    DateTime('Start of the range (inclusive; ISO 8601 with offset), rounded down to the hour. Default: 30 days before `to`'),
  ),
  to: Type.Optional(DateTime('End of the range (exclusive), rounded up to the hour. Default: now')),
  timezone: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 64,
      default: 'UTC',
      description: 'IANA time zone the buckets are aligned to (local midnight, Monday, first of the month)',
      examples: ['Europe/Paris'],
    }),
  ),
  interval: Type.Optional(
    StringEnum(INTERVALS, { default: 'day', description: `Bucket size of the series; at most ${MAX_POINTS} buckets` }),
  ),
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: STATS_LIMIT.max,
      default: STATS_LIMIT.default,
      description: `Entries of each top list, 1 to ${STATS_LIMIT.max}`,
    }),
  ),
}

export const StatsQuery = Type.Object(rangeFields)

export const WorkspaceStatsQuery = Type.Object({
  ...rangeFields,
  domain: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'Only visits of links on this short domain' })),
  folderId: Type.Optional(
    Type.Integer({ minimum: 1, maximum: MAX_ROW_ID, description: 'Only links in this folder now (their visits from before too)' }),
  ),
  tag: Type.Optional(
    // No minLength: an empty tag is refused with the blank ones, naming /tag (src/links/link-input.ts, tagFilterKeys).
    Type.Array(Type.String({ maxLength: LIMITS.tag }), {
      maxItems: LIMITS.tags,
      description: 'Only links that have this tag now (their visits from before too), ignoring case; repeat it for links that have all of them (slower: see the README)',
    }),
  ),
})

const Count = (description: string) => Type.Integer({ minimum: 0, description })
const counts = {
  clicks: Count('Visits by people (bots excluded)'),
  visitors: Count(
    'Unique visitors: a visitor counts once per UTC day they came, where their first visit of that day falls (its hour, ' +
      'its country, referrer, device, OS, browser and destination): a bucket, an entry or a range that starts during a ' +
      'day may count fewer visitors than clicks, even none',
  ),
}

const TopEntry = Type.Object({
  value: Type.Union([Type.String(), Type.Null()], { description: 'null: unknown (or a direct visit, for referrers)' }),
  ...counts,
})
const TopList = (description: string) => Type.Array(TopEntry, { description: `${description}, most clicks first` })

const tops = {
  countries: TopList('ISO 3166-1 alpha-2 countries'),
  referrers: TopList('Referrer hosts'),
  devices: TopList('desktop, mobile, tablet, tv, other (no User-Agent, or one nothing is known of); bots are left out'),
  os: TopList('Operating systems'),
  browsers: TopList('Browsers'),
  destinations: TopList("The urls chosen (the link's, a geolocation rule's or a rotator entry's), without the visits' query strings"),
}

const Totals = Type.Object({ ...counts, bots: Count('Visits by bots and link previews') })
const Bucket = Type.Object({
  start: Type.String({ format: 'date-time', description: "Start of the bucket, with the time zone's offset" }),
  ...Totals.properties,
})

const statsFields = {
  from: Type.String({ format: 'date-time', description: 'Start of the range counted (rounded down to the hour)' }),
  to: Type.String({ format: 'date-time', description: 'End of the range counted, exclusive (rounded up to the hour)' }),
  timezone: Type.String(),
  interval: StringEnum(INTERVALS),
  totals: Totals,
  series: Type.Array(Bucket, { description: 'Every bucket of the range, oldest first, zeros included' }),
}

const example = {
  from: '2026-11-01T00:00:00+01:00',
  to: '2026-11-03T00:00:00+01:00',
  timezone: 'Europe/Paris',
  interval: 'day',
  totals: { clicks: 12, visitors: 9, bots: 2 },
  series: [
    { start: '2026-11-01T00:00:00+01:00', clicks: 5, visitors: 4, bots: 0 },
    { start: '2026-11-02T00:00:00+01:00', clicks: 7, visitors: 5, bots: 2 },
  ],
}
const exampleTops = {
  countries: [{ value: 'FR', clicks: 8, visitors: 6 }, { value: null, clicks: 4, visitors: 3 }],
  referrers: [{ value: null, clicks: 9, visitors: 7 }, { value: 'news.example', clicks: 3, visitors: 2 }],
  devices: [{ value: 'mobile', clicks: 12, visitors: 9 }],
  os: [{ value: 'iOS', clicks: 12, visitors: 9 }],
  browsers: [{ value: 'Safari', clicks: 12, visitors: 9 }],
  destinations: [{ value: 'https://example.com/summer-sale', clicks: 12, visitors: 9 }],
}

export const LinkStats = Type.Object(
  {
    link: Type.Object({ uniq: Type.Integer(), domain: Type.String(), slug: Type.String() }),
    ...statsFields,
    top: Type.Object(tops),
  },
  {
    $id: 'LinkStats',
    description: 'Clicks, unique visitors and bots of one link over a range, by bucket and by breakdown',
    examples: [{ link: { uniq: 42, domain: 'go.brand.com', slug: 'summer' }, ...example, top: exampleTops }],
  },
)

const TopLink = Type.Object({ uniq: Type.Integer(), domain: Type.String(), slug: Type.String(), ...counts })

export const WorkspaceStats = Type.Object(
  {
    ...statsFields,
    top: Type.Object({
      ...tops,
      links: Type.Array(TopLink, { description: 'Links with the most clicks (links deleted since are left out)' }),
    }),
  },
  {
    $id: 'WorkspaceStats',
    description: "The same for the workspace's links, all of them or those the filters name",
    examples: [{ ...example, top: { ...exampleTops, links: [{ uniq: 42, domain: 'go.brand.com', slug: 'summer', clicks: 12, visitors: 9 }] } }],
  },
)

export const VisitsQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: VISITS_LIMIT.max,
      default: VISITS_LIMIT.default,
      description: `Visits per page, 1 to ${VISITS_LIMIT.max}`,
    }),
  ),
  cursor: Type.Optional(
    Type.String({ maxLength: 200, description: 'The nextCursor of the previous page, as it was given; omit it for the first page' }),
  ),
  from: Type.Optional(DateTime('Only visits at or after this instant (inclusive)')),
  to: Type.Optional(DateTime('Only visits before this instant (exclusive)')),
})

/** What a visit's record may say (src/analytics/user-agent.ts, src/redirects/evaluate.ts): closed lists, enums for clients. */
export const DEVICES = ['desktop', 'mobile', 'tablet', 'tv', 'bot', 'other'] as const
export const REASONS = ['default', 'geolocation', 'rotator'] as const
export const ANSWERS = ['redirect', 'masking', 'interstitial', 'crawler'] as const

const Nullable = (description: string) => Type.Union([Type.String(), Type.Null()], { description })

export const Visit = Type.Object({
  at: Type.String({ format: 'date-time', description: 'When (UTC, milliseconds)' }),
  country: Nullable('ISO 3166-1 alpha-2; null when unknown'),
  referrerHost: Nullable("The referrer's host; null for a direct visit"),
  device: StringEnum(DEVICES, { description: 'other: no User-Agent, or one nothing is known of' }),
  os: Nullable('null when unknown'),
  browser: Nullable('null when unknown'),
  destination: Type.String({ description: "The url chosen (the link's, a geolocation rule's or a rotator entry's), without the visit's query string" }),
  reason: StringEnum(REASONS, { description: 'How the destination was chosen' }),
  answer: StringEnum(ANSWERS, { description: 'What the visitor was answered' }),
  bot: Type.Boolean(),
})

export const VisitList = Type.Object(
  {
    visits: Type.Array(Visit, { description: 'Newest first' }),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass it as cursor for the next page; null on the last page' }),
  },
  {
    $id: 'VisitList',
    description: "A page of a link's raw visits, newest first. No visitor key and no address: neither is kept.",
    examples: [
      {
        visits: [
          {
            at: '2026-11-02T09:15:02.120Z',
            country: 'FR',
            referrerHost: 'news.example',
            device: 'mobile',
            os: 'iOS',
            browser: 'Safari',
            destination: 'https://example.com/summer-sale',
            reason: 'default',
            answer: 'redirect',
            bot: false,
          },
        ],
        nextCursor: 'eyJ0IjoiMTc5MzYwMDAwMDAwMDAwMCIsInMiOiI0MiJ9',
      },
    ],
  },
)

export type StatsRequest = Static<typeof StatsQuery>
export type WorkspaceStatsRequest = Static<typeof WorkspaceStatsQuery>
export type VisitsRequest = Static<typeof VisitsQuery>
export type LinkStatsBody = Static<typeof LinkStats>
export type WorkspaceStatsBody = Static<typeof WorkspaceStats>
export type TopEntryBody = Static<typeof TopEntry>
export type BucketBody = Static<typeof Bucket>
export type VisitBody = Static<typeof Visit>
export type Interval = (typeof INTERVALS)[number]
