/**
 * The link resource: what create and update accept (LinkInput, LinkPatch) and what they answer
 * (LinkRecord). These schemas validate the routes, give the TypeScript types and make the OpenAPI document.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { StringEnum } from './enum.js'
import { MAX_URL_LENGTH, NOT_BLANK_PATTERN, PathId } from './formats.js'

export const PLATFORMS = [
  'linkedin',
  'facebook',
  'gtm',
  'quora',
  'pinterest',
  'twitter',
  'ga',
  'bing',
  'nexus',
  'adroll',
  'adwords',
] as const

/** The characters of a slug (contract section 4). */
export const SLUG_PATTERN = '^[A-Za-z0-9_-]+$'

export const LIMITS = {
  slug: 64,
  title: 512,
  description: 2048,
  note: 4096,
  tags: 50,
  /** Elements of the array form before blanks and duplicates are dropped: a bound on the work, far above any real use. */
  tagElements: 1000,
  tag: 64,
  pixels: 50,
  pixelValue: 512,
  pixelTitle: 512,
  geolocations: 250,
  rotator: 20,
  linkScripts: 50,
  password: 128,
} as const

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])

export const HttpUrl = (description: string) =>
  Type.String({ format: 'http-url', maxLength: MAX_URL_LENGTH, description, examples: ['https://example.com/summer-sale'] })

/** A URL field that may also be sent empty (""), which stores null and lets autofill fill it. */
const OptionalUrl = (description: string) =>
  Nullable(Type.Union([HttpUrl(description), Type.Literal('')]))

export const Platform = StringEnum(PLATFORMS, { description: 'Platform the pixel belongs to' })

/**
 * A pixel as a link's input names it. Other fields are accepted and ignored (clients send whole Pixel
 * records back, with their workspaceId and createdAt); they are left out of the schema rather than typed
 * `unknown`, which generated clients render as `any`.
 */
export const PixelInput = Type.Object(
  {
    platform: Platform,
    value: Type.String({
      // Not blank (so at least one character).
      pattern: NOT_BLANK_PATTERN,
      maxLength: LIMITS.pixelValue,
      description: 'The pixel id on its platform',
    }),
    id: Type.Optional(
      Type.String({ format: 'uuid', description: 'A pixel of the workspace to reuse; unknown ids are ignored' }),
    ),
    title: Type.Optional(Nullable(Type.String({ maxLength: LIMITS.pixelTitle }))),
  },
  {
    $id: 'PixelInput',
    description:
      "A pixel to attach: the workspace's pixel with this id, else the one with this platform and value, else a " +
      'new one. Other fields (a Pixel record\'s workspaceId, createdAt) are accepted and ignored.',
    examples: [{ platform: 'facebook', value: '1234567890' }],
  },
)

const PixelReference = Type.String({ format: 'uuid', description: 'The id of a pixel the workspace already has' })

export const Geolocation = Type.Object(
  {
    url: HttpUrl('Where visitors from that country go'),
    value: Type.String({ format: 'country-code', description: 'ISO 3166-1 alpha-2 code, either case', examples: ['DE'] }),
  },
  { $id: 'GeolocationInput', description: 'A per-country destination' },
)

const Weight = Type.Union([Type.Integer({ minimum: 1, maximum: 100 }), Type.String({ pattern: '^[0-9]+$', maxLength: 20 })], {
  description: 'Weight in percent, 1 to 100 (a number or a string of digits)',
})

export const RotatorEntry = Type.Object(
  {
    url: HttpUrl('One of the destinations the link rotates between'),
    value: Weight,
  },
  { $id: 'RotatorEntryInput', description: 'A weighted destination of the link rotator' },
)

export const LinkExpirationInput = Type.Object(
  {
    enable: Type.Boolean(),
    end: Type.String({ format: 'date-time', description: 'When the link expires (ISO 8601)', examples: ['2027-01-31T23:59:59.000Z'] }),
    url: Type.Optional(
      Nullable(HttpUrl('Where the link redirects once it has expired; null or absent: visitors get a page saying it has expired (410)')),
    ),
    timezone: Type.Integer({ minimum: -12, maximum: 14, description: 'Offset in hours, kept for display' }),
  },
  { $id: 'LinkExpirationInput', description: 'When the link expires and where it goes then' },
)

export const PasswordProtectInput = Type.Object(
  {
    enable: Type.Boolean(),
    password: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: LIMITS.password,
        description: 'Required to enable protection, except on update when the link already has a password',
      }),
    ),
  },
  { $id: 'PasswordProtectInput', description: 'Password protection; the password is stored hashed and never returned' },
)

/** Every field of the specification's Link, as create accepts it. */
const linkFields = {
  url: HttpUrl('Destination of the redirect'),
  domain: Type.String({
    minLength: 1,
    maxLength: 253,
    description: "Short domain; defaults to the workspace's default domain, else the service's",
    examples: ['go.brand.com'],
  }),
  id: Type.String({
    minLength: 1,
    maxLength: LIMITS.slug,
    pattern: SLUG_PATTERN,
    description: 'Slug: the link is <domain>/<id>. Generated when omitted. Unique per domain regardless of case',
    examples: ['summer'],
  }),
  title: Nullable(Type.String({ maxLength: LIMITS.title, description: 'Open-graph title' })),
  description: Nullable(Type.String({ maxLength: LIMITS.description, description: 'Open-graph description' })),
  image: OptionalUrl('Open-graph image'),
  favicon: OptionalUrl('Favicon address'),
  extraOptionsGeolocations: Type.Array(Type.Ref(Geolocation), {
    maxItems: LIMITS.geolocations,
    description: 'Per-country destinations; the first rule matching the visitor wins',
  }),
  extraOptionsLinkRotator: Type.Array(Type.Ref(RotatorEntry), {
    maxItems: LIMITS.rotator,
    description: "Weighted destinations; weights add up to at most 100 and the link's url gets the rest",
  }),
  folderId: Nullable(
    Type.Union([Type.Integer({ minimum: 1 }), Type.String({ pattern: '^[0-9]+$' })], {
      description: 'A folder of the workspace (a number or a string of digits)',
    }),
  ),
  pixels: Type.Array(Type.Union([Type.Ref(PixelInput), PixelReference]), {
    maxItems: LIMITS.pixels,
    description: 'Tracking pixels: pixel objects, or ids of pixels the workspace has',
  }),
  showGDPR: Type.Boolean({ description: 'Show a consent banner before loading pixels' }),
  tags: Type.Union([Type.Array(Type.String(), { maxItems: LIMITS.tagElements }), Type.String()], {
    description: `Tags, as an array or one comma-separated string; at most ${LIMITS.tags} of ${LIMITS.tag} characters`,
    examples: [['summer', 'email']],
  }),
  note: Nullable(Type.String({ maxLength: LIMITS.note, description: 'Private note for the dashboard' })),
  deepLinkingEnable: Type.Boolean(),
  linkScripts: Nullable(
    Type.Array(Type.Integer({ minimum: 1 }), { maxItems: LIMITS.linkScripts, description: 'Ids of workspace scripts' }),
  ),
  linkScriptEnable: Type.Boolean(),
  masking: Type.Boolean({ description: 'Show the destination in a frame under the short address' }),
  linkExpiration: Nullable(Type.Ref(LinkExpirationInput)),
  passwordProtect: Nullable(Type.Ref(PasswordProtectInput)),
}

const { url, ...optionalFields } = linkFields

export const LinkInput = Type.Object(
  { url, ...Type.Partial(Type.Object(optionalFields)).properties },
  { $id: 'LinkInput', description: 'A link to create. Unknown fields are ignored.' },
)

// On an update the link's domain and slug stay as they are: given, each must be the link's own.
const patchFields = {
  ...linkFields,
  domain: Type.String({ ...linkFields.domain, description: "The link's short domain: may be repeated, not changed" }),
  id: Type.String({ ...linkFields.id, description: "The link's slug: may be repeated (in any case), not changed" }),
}

export const LinkPatch = Type.Partial(Type.Object(patchFields), {
  $id: 'LinkPatch',
  description:
    'The fields to change: a field present replaces the stored value, null clears a nullable field, an absent field is kept. ' +
    "domain and id cannot change; repeating the link's own values is accepted.",
})

export const CreateLinkBody = Type.Object(
  {
    link: Type.Ref(LinkInput),
    autofill: Type.Optional(
      Type.Boolean({
        default: true,
        description:
          'Fill the empty title, description, image and favicon from the destination page (og:, twitter:, <title>, ' +
          'meta description, icon link), within AUTOFILL_TIMEOUT_MS. Never fails the request; the X-Autofill ' +
          'response header says what happened.',
      }),
    ),
  },
  {
    examples: [
      {
        link: { url: 'https://example.com/summer-sale', domain: 'go.brand.com', id: 'summer', tags: ['summer'] },
        autofill: true,
      },
    ],
  },
)

export const UpdateLinkBody = Type.Object(
  {
    link: Type.Ref(LinkPatch),
    autofill: Type.Optional(
      Type.Boolean({
        default: true,
        description:
          'Like create, on the merged link: changing url with title set to null fetches the new page; values the ' +
          'link has are never overwritten. An empty link object changes nothing and fetches nothing.',
      }),
    ),
  },
  { examples: [{ link: { title: 'Summer sale', tags: 'summer,email' } }] },
)

export const PIXEL_EXAMPLE = {
  id: '6f1c2a9e-4a39-4c55-9d3e-2b7c8f0a1d22',
  platform: 'facebook',
  value: '1234567890',
  title: 'Retargeting',
  workspaceId: 1,
  createdAt: '2026-11-22T10:00:00.000Z',
}

/** A pixel as links and GET /v1/pixels answer it: one named component, `Pixel`, for both. */
export const PixelRecord = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    platform: Platform,
    value: Type.String(),
    title: Nullable(Type.String()),
    workspaceId: Type.Integer(),
    createdAt: Type.String({ format: 'date-time' }),
  },
  { $id: 'Pixel', examples: [PIXEL_EXAMPLE] },
)

const UtcDateTime = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds' })

export const LinkRecord = Type.Object(
  {
    uniq: Type.Integer({ description: 'Server-assigned id, the uniqId of PUT /v1/links/{uniqId}' }),
    id: Type.String({ description: 'The slug, as it was given' }),
    domain: Type.String(),
    shortUrl: Type.String({ examples: ['https://go.brand.com/summer'] }),
    url: Type.String(),
    title: Nullable(Type.String()),
    description: Nullable(Type.String()),
    image: Nullable(Type.String()),
    favicon: Nullable(Type.String()),
    extraOptionsGeolocations: Type.Array(Type.Object({ url: Type.String(), value: Type.String() })),
    extraOptionsLinkRotator: Type.Array(Type.Object({ url: Type.String(), value: Type.Integer() })),
    folderId: Nullable(Type.Integer()),
    pixels: Type.Array(Type.Ref(PixelRecord)),
    showGDPR: Type.Boolean(),
    tags: Type.Array(Type.String()),
    note: Nullable(Type.String()),
    deepLinkingEnable: Type.Boolean(),
    linkScripts: Nullable(Type.Array(Type.Integer())),
    linkScriptEnable: Type.Boolean(),
    masking: Type.Boolean(),
    linkExpiration: Nullable(
      Type.Object({ enable: Type.Boolean(), end: UtcDateTime, url: Nullable(Type.String()), timezone: Type.Integer() }),
    ),
    passwordProtect: Nullable(Type.Object({ enable: Type.Boolean() }, { description: 'The password is never returned' })),
    workspaceId: Type.Integer(),
    createdDate: UtcDateTime,
    updatedDate: UtcDateTime,
    clicks: Type.Integer({
      minimum: 0,
      description: 'All-time clicks (visits by people; bots excluded), also counting visits older than the raw retention',
    }),
  },
  {
    $id: 'LinkRecord',
    examples: [
      {
        uniq: 42,
        id: 'summer',
        domain: 'go.brand.com',
        shortUrl: 'https://go.brand.com/summer',
        url: 'https://example.com/summer-sale',
        title: 'Summer sale',
        description: null,
        image: null,
        favicon: null,
        extraOptionsGeolocations: [{ url: 'https://example.de/sommer', value: 'DE' }],
        extraOptionsLinkRotator: [],
        folderId: null,
        pixels: [],
        showGDPR: false,
        tags: ['summer'],
        note: null,
        deepLinkingEnable: false,
        linkScripts: null,
        linkScriptEnable: false,
        masking: false,
        linkExpiration: null,
        passwordProtect: null,
        workspaceId: 1,
        createdDate: '2026-11-22T10:00:00.000Z',
        updatedDate: '2026-11-22T10:00:00.000Z',
        clicks: 128,
      },
    ],
  },
)

export const UniqIdParams = Type.Object({
  uniqId: PathId('The uniq of the link', 42),
})

export const DomainSlugParams = Type.Object({
  domain: Type.String({ description: 'Short domain of the link', examples: ['go.brand.com'] }),
  id: Type.String({ description: 'Slug of the link (any case)', examples: ['summer'] }),
})

export type LinkInputBody = Static<typeof LinkInput>
export type LinkPatchBody = Static<typeof LinkPatch>
export type CreateLinkRequest = Static<typeof CreateLinkBody>
export type UpdateLinkRequest = Static<typeof UpdateLinkBody>
export type LinkRecordBody = Static<typeof LinkRecord>
export type PixelInputBody = Static<typeof PixelInput>
export type PixelRecordBody = Static<typeof PixelRecord>
export type Platform = (typeof PLATFORMS)[number]
