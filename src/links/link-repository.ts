/** Every database access of the links module: reads, the list, the create and update transactions, delete. */
import { Prisma } from '../generated/prisma/client.js'
import { changesGroups, GROUPED_LINK_COLUMNS, IN_NO_GROUP_SQL, lockRollup, moveGroupHistory, type GroupedLink } from '../analytics/group-history.js'
import { clicksSql } from '../analytics/stats-clicks.js'
import { randomUUID } from 'node:crypto'
import type { Database, Prepared, PrismaClient, SqlQuery } from '../db/database.js'
import { isConnectionLost, isDatabaseUnavailable, isUniqueViolation, OutcomeUnknownError } from '../db/errors.js'
import { KeyedQueue } from '../db/keyed-queue.js'
import { inSqlTransaction, TRANSACTION_OPTIONS } from '../db/transaction.js'
import type { PageMetadata } from '../autofill/metadata.js'
import { fieldError } from '../errors/app-error.js'
import type { LinkSettings, PixelSpec } from './link-input.js'
import { slugKey } from './slug.js'
import { LIST_LIMIT } from '../../schemas/link-list.js'

const withPixels = {
  pixels: { orderBy: { position: 'asc' }, include: { pixel: true } },
} as const satisfies Prisma.LinkInclude

/** A link as stored, and its all-time clicks when the statement that read it counted them. */
export type StoredLink = Prisma.LinkGetPayload<{ include: typeof withPixels }> & { clicks?: number }
/** A pixel as a link's record shows it. */
type PixelRow = StoredLink['pixels'][number]['pixel']

/**
 * A link's columns and its pixels in one row, as plain SQL reads and writes return it (the same shape as
 * Prisma's `include: withPixels`, which took three statements). The TIMESTAMP(3) columns hold UTC, as Prisma
 * writes them: read AT TIME ZONE 'UTC' so that the driver parses them right whatever the process's zone.
 */
const LINK_COLUMNS = `l."uniq", l."workspaceId", l."domain", l."slug", l."slugKey", l."url", l."title", l."description",
  l."image", l."favicon", l."geolocations", l."linkRotator", l."folderId", l."showGDPR", l."tags", l."tagKeys", l."note",
  l."deepLinkingEnable", l."linkScripts", l."linkScriptEnable", l."masking", l."expirationEnable",
  l."expiresAt" AT TIME ZONE 'UTC' AS "expiresAt", l."expirationUrl", l."expirationTimezone", l."passwordEnable",
  l."passwordHash", l."createdAt" AT TIME ZONE 'UTC' AS "createdAt", l."updatedAt" AT TIME ZONE 'UTC' AS "updatedAt"`
const PIXELS_COLUMN = `(SELECT coalesce(json_agg(json_build_object('linkUniq', lp."linkUniq", 'pixelId', lp."pixelId",
    'position', lp."position", 'pixel', json_build_object('id', p."id", 'workspaceId', p."workspaceId",
    'platform', p."platform", 'value', p."value", 'title', p."title", 'createdAt', p."createdAt" AT TIME ZONE 'UTC'))
    ORDER BY lp."position"), '[]') FROM "LinkPixel" lp JOIN "Pixel" p ON p."id" = lp."pixelId" WHERE lp."linkUniq" = l."uniq") AS "pixels"`
/** A link without pixels has no LinkPixel rows to look at: the column is a constant. */
const NO_PIXELS_COLUMN = `'[]'::json AS "pixels"`
/** The link's all-time clicks, for its record: counted with the read, not by a statement of their own. */
const CLICKS_COLUMN = `${clicksSql('l."uniq"')} AS "clicks"`
const LINK_SELECT = `SELECT ${LINK_COLUMNS}, ${PIXELS_COLUMN}, ${CLICKS_COLUMN} FROM "Link" l`

type LinkRow = Omit<StoredLink, 'pixels' | 'clicks'> & {
  /** count(*) is a bigint, which the driver hands over as text. */
  clicks?: string
  pixels: { linkUniq: number; pixelId: string; position: number; pixel: Omit<StoredLink['pixels'][number]['pixel'], 'createdAt'> & { createdAt: string } }[]
}

function toStoredLink(row: LinkRow): StoredLink {
  return {
    ...row,
    // A column Prisma declares String[] but that the table lets be NULL: Prisma reads NULL as [].
    tags: row.tags ?? [],
    tagKeys: row.tagKeys ?? [],
    clicks: row.clicks === undefined ? undefined : Number(row.clicks),
    pixels: row.pixels.map((entry) => ({ ...entry, pixel: { ...entry.pixel, createdAt: new Date(entry.pixel.createdAt) } })),
  }
}

export async function findLinkByUniq(database: Database, workspaceId: number, uniq: number): Promise<StoredLink | null> {
  const [row] = await database.sql<LinkRow>(`${LINK_SELECT} WHERE l."uniq" = $1 AND l."workspaceId" = $2`, [uniq, workspaceId], 'prepared')
  return row ? toStoredLink(row) : null
}

export async function findLinkBySlug(
  database: Database,
  workspaceId: number,
  domain: string,
  slug: string,
): Promise<StoredLink | null> {
  const [row] = await database.sql<LinkRow>(`${LINK_SELECT} WHERE l."domain" = $1 AND l."slugKey" = $2 AND l."workspaceId" = $3`, [
    domain,
    slugKey(slug),
    workspaceId,
  ], 'prepared')
  return row ? toStoredLink(row) : null
}

/** Whether a link of any workspace holds `slug` (in any case) on `domain`. */
export async function slugInUse(database: Database, domain: string, slug: string): Promise<boolean> {
  const rows = await database.sql(`SELECT 1 FROM "Link" WHERE "domain" = $1 AND "slugKey" = $2`, [domain, slugKey(slug)], 'prepared')
  return rows.length > 0
}

/** Which of these slugs (domain and slugKey) are taken, as `domain/slugKey`: one statement for a batch. */
export async function slugsInUse(database: Database, slugs: { domain: string; slugKey: string }[]): Promise<Set<string>> {
  if (slugs.length === 0) return new Set()
  const rows = await database.sql<{ key: string }>(
    `SELECT l."domain" || '/' || l."slugKey" AS "key"
     FROM unnest($1::text[], $2::text[]) AS s("domain", "slugKey") JOIN "Link" l ON l."domain" = s."domain" AND l."slugKey" = s."slugKey"`,
    [slugs.map((slug) => slug.domain), slugs.map((slug) => slug.slugKey)],
  )
  return new Set(rows.map((row) => row.key))
}

const JSON_COLUMNS = new Set(['geolocations', 'linkRotator', 'linkScripts'])
const TIMESTAMP_COLUMNS = new Set(['expiresAt', 'createdAt', 'updatedAt'])

/**
 * A column's value as an SQL parameter: JSON as text (the driver would send an array as a SQL array), instants as
 * UTC text (as Prisma stores them), Prisma's DbNull as NULL; castOf gives the cast its placeholder takes.
 */
function paramValue(name: string, value: unknown): unknown {
  if (JSON_COLUMNS.has(name)) return value === Prisma.DbNull || value === null ? null : JSON.stringify(value)
  if (TIMESTAMP_COLUMNS.has(name)) return value === null ? null : (value as Date).toISOString()
  return value
}
const castOf = (name: string) => (JSON_COLUMNS.has(name) ? '::jsonb' : TIMESTAMP_COLUMNS.has(name) ? '::timestamp(3)' : '')

/** `columns()`'s values as SQL parameters (paramValue), appended to `params`, with their placeholders. */
function sqlValues(data: Record<string, unknown>, params: unknown[]): { name: string; placeholder: string }[] {
  return Object.entries(data).map(([name, value]) => {
    params.push(paramValue(name, value))
    return { name: `"${name}"`, placeholder: `$${params.length}${castOf(name)}` }
  })
}

/** The columns of a new link's row, by name: its settings and where it lives; created and updated `now`. */
function newLinkColumns(link: { workspaceId: number; domain: string; slug: string; settings: LinkSettings }, now: Date): Record<string, unknown> {
  return {
    ...columns(link.settings),
    // Every new row names the column, whatever its settings (a multi-row INSERT takes its columns from the first).
    passwordHash: link.settings.password?.hash ?? null,
    url: link.settings.url,
    workspaceId: link.workspaceId,
    domain: link.domain,
    slug: link.slug,
    slugKey: slugKey(link.slug),
    createdAt: now,
    updatedAt: now,
  }
}

/**
 * How long a create whose connection broke mid-statement keeps trying to learn whether its link was stored
 * (settleLostInsert) before it answers 503 saying the outcome is unknown: an outage of a few seconds (a
 * failover, a restarted pooler) is outlasted, and the request still ends well within a client's usual timeout.
 */
export const SETTLE_LOST_INSERT_MS = 5000
const SETTLE_RETRY_MS = 100

/** A link without pixels and scripts: one INSERT … RETURNING, no transaction and nothing read again. */
async function insertPlainLink(database: Database, link: NewLink): Promise<StoredLink> {
  const data = newLinkColumns(link, new Date())
  const params: unknown[] = []
  const values = sqlValues(data, params)
  const insertLink = `INSERT INTO "Link" AS l (${values.map((value) => value.name).join(', ')}) VALUES (${values.map((value) => value.placeholder).join(', ')})
       RETURNING ${LINK_COLUMNS}, ${NO_PIXELS_COLUMN}`
  // With an Idempotency-Key, the key's row goes in the same statement: both are stored, or neither.
  const sql = link.idempotency
    ? `WITH inserted AS (${insertLink}), keyed AS (${idempotentCreateSql(params, link.workspaceId, link.idempotency, 'inserted')})
       SELECT * FROM inserted`
    : insertLink
  const insert = async () => {
    const [row] = link.idempotency ? await writeInTransaction<LinkRow>(database, sql, params, 'prepared') : await database.write<LinkRow>(sql, params, 'prepared')
    return toStoredLink(row)
  }
  try {
    return await insert()
  } catch (error) {
    if (!(error instanceof OutcomeUnknownError)) throw error
    return settleLostInsert(database, link, data.createdAt as Date, insert, error)
  }
}

/**
 * The connection broke after the INSERT was sent, so PostgreSQL may have stored the link (and its answer was
 * lost) or not: answering 503 could hide a stored link, answering 201 could announce one that is not. The same
 * row is sent again until the database answers: the unique key on (domain, slugKey) makes it wait for the first
 * INSERT if that one is still running, so it either stores the link now (the first was not stored) or fails on
 * the key, and the row then found is this request's when it has this request's workspace, url and creation
 * instant (to the millisecond): stored once either way. A row that is someone else's means the slug was taken
 * and this link was not stored (the unique violation is thrown as the first attempt would have). When the
 * database stays out of reach for SETTLE_LOST_INSERT_MS, the outcome stays unknown and the request says so; so it
 * does at once when the connection was ended by the close of the app (Database.interrupt): the close is about to
 * cut the client's connection, and an INSERT sent again then could store the link after it, unanswered.
 */
async function settleLostInsert(
  database: Database,
  link: { workspaceId: number; domain: string; slug: string; settings: LinkSettings },
  createdAt: Date,
  insert: () => Promise<StoredLink>,
  lost: OutcomeUnknownError,
): Promise<StoredLink> {
  const deadline = Date.now() + SETTLE_LOST_INSERT_MS
  while (Date.now() < deadline && !database.interrupted()) {
    await new Promise((resolve) => setTimeout(resolve, SETTLE_RETRY_MS))
    if (database.interrupted()) break
    try {
      return await insert()
    } catch (error) {
      if (!isUniqueViolation(error)) {
        if (isDatabaseUnavailable(error)) continue
        throw error
      }
      let found: LinkRow | undefined
      try {
        // Whatever workspace holds it (a reserved domain is shared by the official tokens of several).
        ;[found] = await database.sql<LinkRow>(`${LINK_SELECT} WHERE l."domain" = $1 AND l."slugKey" = $2`, [link.domain, slugKey(link.slug)])
      } catch (readError) {
        if (isDatabaseUnavailable(readError)) continue
        throw readError
      }
      if (found && found.workspaceId === link.workspaceId && found.url === link.settings.url && found.createdAt.getTime() === createdAt.getTime()) {
        return toStoredLink(found)
      }
      // Another's: the slug is taken and this link was not stored. Gone in between: try again.
      if (found) throw error
    }
  }
  throw lost
}

/**
 * A statement that stores links, in a transaction of its own: a batch's, and a create's with its Idempotency-Key
 * rows. As a statement alone it would commit when it ends, whether or not its client is still there: one that
 * lost its connection while waiting (for the lock of a slug another create holds) could commit after its request
 * was answered "outcome unknown", and after that request's retry with the key had found no link of the key and
 * stored the links again (review bulk). In a transaction PostgreSQL rolls it back once it finds its client gone;
 * only a COMMIT whose answer was lost leaves the outcome unknown, and that is decided at once. A deadlock with
 * another batch that shares slugs runs it again (review today: a few batches in a hundred had answered 503).
 */
async function writeInTransaction<Row>(database: Database, sql: string, params: unknown[], prepared?: Prepared): Promise<Row[]> {
  let committing = false
  try {
    // Again after a deadlock or a serialization failure, as the service's other transactions.
    return await inSqlTransaction(database, async (query) => {
      committing = false
      const rows = await query<Row>(sql, params, prepared)
      committing = true
      return rows
    })
  } catch (error) {
    throw committing && isDatabaseUnavailable(error) && !(error instanceof OutcomeUnknownError) ? new OutcomeUnknownError(error) : error
  }
}

/** Whether a link can be stored by insertPlainLinks: no pixels and no scripts to lock first. */
export const isPlainLink = (settings: LinkSettings) => settings.pixels.length === 0 && !settings.linkScripts?.length

/**
 * Links without pixels or scripts in one multi-row INSERT … ON CONFLICT DO NOTHING: each link's stored row in
 * the order given, or null where its slug was taken (by a stored link or by an earlier one of the batch). Throws
 * as the single INSERT does (a folder deleted meanwhile fails the whole statement: the caller stores them one by one).
 *
 * The rows are inserted in the order of their unique key (domain, slug key), whatever order the batch gave them
 * in: two batches asking for the same slugs in different orders would otherwise each hold a key the other waits
 * for, a deadlock (one in a few batches of the same 100 slugs shuffled), which PostgreSQL breaks only after a second
 * and which failed a batch once its retries ran out. Any one order shared by every instance does; the key's, with
 * the batch's own order among repeats, so that a slug the batch repeats still goes to its first link. The uniqs are
 * still the batch's order: drawn first, in that order, and each row takes its own.
 */
export async function insertPlainLinks(
  database: Database,
  links: { workspaceId: number; domain: string; slug: string; settings: LinkSettings; idempotency?: IdempotentCreateKey }[],
): Promise<(StoredLink | null)[]> {
  if (links.length === 0) return []
  const now = new Date()
  const params: unknown[] = []
  // Every link has the same columns (full settings); the first one's order is the statement's. Built without
  // an object per value: a batch has thousands of them.
  const newRows = links.map((link) => newLinkColumns(link, now))
  const names = Object.keys(newRows[0])
  const casts = names.map(castOf)
  const keyOf = (index: number) => `${links[index].domain}\u0000${slugKey(links[index].slug)}`
  const inKeyOrder = links.map((_, index) => ({ index, key: keyOf(index) })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.index - b.index))
  const tuples = inKeyOrder.map(({ index }) => {
    const data = newRows[index]
    let tuple = `(SELECT "drawn"[${index + 1}] FROM uniqs)`
    for (let i = 0; i < names.length; i++) {
      params.push(paramValue(names[i], data[names[i]] ?? null))
      tuple += `, $${params.length}${casts[i]}`
    }
    return `(${tuple})`
  })
  const uniqs = `uniqs AS MATERIALIZED (SELECT ARRAY(SELECT nextval('"Link_uniq_seq"') FROM generate_series(1, ${links.length})) AS "drawn")`
  const insert = `INSERT INTO "Link" AS l ("uniq", ${names.map((name) => `"${name}"`).join(', ')}) VALUES ${tuples.join(', ')}
     ON CONFLICT DO NOTHING RETURNING ${LINK_COLUMNS}, ${NO_PIXELS_COLUMN}`
  const keyed = links.filter((link) => link.idempotency)
  // A lost COMMIT's answer is OutcomeUnknownError: the links may be stored. With an Idempotency-Key, each link's key
  // row goes in the same statement (both stored, or neither), so that the key's retry finds what was (findIdempotentCreates).
  const rows = await writeInTransaction<LinkRow>(
    database,
    keyed.length === 0 ? `WITH ${uniqs} ${insert}` : `WITH ${uniqs}, inserted AS (${insert}), keyed AS (${idempotentCreatesSql(params, keyed)}) SELECT * FROM inserted`,
    params,
  )
  const byKey = new Map(rows.map((row) => [`${row.domain}\u0000${row.slugKey}`, row]))
  return links.map((link) => {
    const key = `${link.domain}\u0000${slugKey(link.slug)}`
    const row = byKey.get(key)
    // The first link of the batch with this slug has the row; the others were refused by the unique key.
    if (!row) return null
    byKey.delete(key)
    return toStoredLink(row)
  })
}

/**
 * An update that leaves pixels and scripts alone: one UPDATE … RETURNING, whose row lock orders concurrent
 * writers as the transaction's SELECT … FOR NO KEY UPDATE did; updatedDate never goes back (GREATEST, evaluated
 * on the row as it is once the lock is held). Null when the link was deleted meanwhile. `sql` is the pool's, or a
 * transaction's when the update moves the link between groups (updateGroupedLink).
 */
async function updatePlainLink(sql: SqlQuery, uniq: number, changes: Partial<LinkSettings>, fill: PageMetadata = {}): Promise<StoredLink | null> {
  const params: unknown[] = [uniq]
  const values = sqlValues(columns(changes) as Record<string, unknown>, params)
  const fills = sqlValues(fill, params)
  params.push(new Date().toISOString())
  // Enabled without a new password, on the hash stored when the row is written: none (another request removed the
  // password meanwhile) leaves the link without protection, as that request asked, not "enabled" with no password.
  // (Disabled is disabled, with or without a hash.)
  const keepsHash = changes.password?.enable === true && changes.password.hash === undefined
  const assignments = [
    ...values.map((value) =>
      keepsHash && value.name === '"passwordEnable"'
        ? `${value.name} = CASE WHEN l."passwordHash" IS NULL THEN NULL ELSE (${value.placeholder})::boolean END`
        : `${value.name} = ${value.placeholder}`,
    ),
    // Empty is empty whether stored as null or as "" (a title sent as ""): both take the page's value.
    ...fills.map((value) => `${value.name} = COALESCE(NULLIF(l.${value.name}, ''), ${value.placeholder})`),
    `"updatedAt" = GREATEST($${params.length}::timestamp(3), l."updatedAt")`,
  ]
  const row = await untilAsSeen((guard) =>
    sql<LinkRow>(
      `UPDATE "Link" AS l SET ${assignments.join(', ')} WHERE l."uniq" = $1${guard} RETURNING ${LINK_COLUMNS}, ${PIXELS_COLUMN}, ${CLICKS_COLUMN}`,
      params,
      'prepared',
    ),
  )
  return row ? toStoredLink(row) : null
}

/**
 * For an UPDATE … RETURNING of a link whose row it did not lock first ($1 its uniq): the subqueries of RETURNING
 * (the link's pixels) read the statement's snapshot, taken before it waited for a writer holding the row (a change
 * of the link's pixels), while the row it updates is the one that writer left. With the guard the row must be
 * the version the snapshot saw, or nothing is updated, and the statement is sent again, without the guard, with a
 * new snapshot (in which the writer it waited for has committed). No row at all (no such link, or one the other
 * conditions refuse) costs that second statement too.
 */
async function untilAsSeen(send: (guard: string) => Promise<LinkRow[]>): Promise<LinkRow | undefined> {
  const [row] = await send(AS_SEEN_GUARD)
  return row ?? (await send(''))[0]
}

const AS_SEEN_GUARD = ' AND l.xmin = (SELECT seen.xmin FROM "Link" AS seen WHERE seen."uniq" = $1)'

/** Column values for the settings present in `settings` (pixels are stored separately). */
function columns(settings: Partial<LinkSettings>): Prisma.LinkUncheckedUpdateInput {
  const data: Prisma.LinkUncheckedUpdateInput = {}
  const copy = ['url', 'title', 'description', 'image', 'favicon', 'folderId', 'showGDPR', 'tags', 'note',
    'deepLinkingEnable', 'linkScriptEnable', 'masking'] as const
  for (const field of copy) if (settings[field] !== undefined) (data as Record<string, unknown>)[field] = settings[field]
  // The list's tag filter ignores case through this lower-case copy (GIN-indexed); tags keep the client's spelling.
  if (settings.tags !== undefined) data.tagKeys = settings.tags.map((tag) => tag.toLowerCase())
  if (settings.geolocations !== undefined) data.geolocations = settings.geolocations
  if (settings.rotator !== undefined) data.linkRotator = settings.rotator
  // JSON null needs Prisma's marker; a plain null would be rejected for a Json column.
  if (settings.linkScripts !== undefined) data.linkScripts = settings.linkScripts ?? Prisma.DbNull
  if (settings.expiration !== undefined) {
    const expiration = settings.expiration
    data.expirationEnable = expiration?.enable ?? null
    data.expiresAt = expiration?.end ?? null
    data.expirationUrl = expiration?.url ?? null
    data.expirationTimezone = expiration?.timezone ?? null
  }
  if (settings.password !== undefined) {
    data.passwordEnable = settings.password?.enable ?? null
    // No new password: the stored hash stays (updatePlainLink keeps protection off a link left without one).
    if (settings.password === null || settings.password.hash !== undefined) data.passwordHash = settings.password?.hash ?? null
  }
  return data
}

/**
 * Ids of the pixels, finding or creating the ones given by platform and value; order and first-seen kept.
 *
 * Every pixel the link will use is locked FOR KEY SHARE, as the link–pixel foreign key would lock it, but
 * before the link's own row: a pixel being deleted meanwhile is then either gone here (a 400 naming it) or
 * deleted only once this link is stored, with the link's updatedDate moved as for any link that loses a
 * pixel (src/pixels/pixel-repository.ts locks the same rows in the same order: pixel, then links).
 *
 * A pixel given by platform and value that the insert found already there can be renamed or deleted by another
 * request before the SELECT locks it: it is then missing as if it had never been, and is inserted again (a few
 * rounds at most: each needs another request to change that pixel in between).
 */
async function resolvePixels(query: SqlQuery, workspaceId: number, specs: PixelSpec[]): Promise<PixelRow[]> {
  if (specs.length === 0) return []
  const pixelKey = (pixel: { platform: string; value: string }) => `${pixel.platform}\u0000${pixel.value}`
  const ids = specs.flatMap((spec) => ('id' in spec ? [spec.id] : []))
  const byId = new Map<string, PixelRow>()
  const byKey = new Map<string, PixelRow>()
  let missing = specs.filter((spec): spec is Exclude<PixelSpec, { id: string }> => !('id' in spec))
  for (let round = 1; ; round++) {
    if (missing.length > 0) {
      // ON CONFLICT DO NOTHING: a concurrent link creating the same pixel is not an error. Inserted in one
      // order for every transaction (by platform, then value), so that two creating the same new pixels wait
      // for each other instead of deadlocking. createdAt in UTC, as Prisma's TIMESTAMP(3) columns hold it.
      const inOrder = missing.slice().sort((a, b) => compare(a.platform, b.platform) || compare(a.value, b.value))
      await query(
        `INSERT INTO "Pixel" ("id", "workspaceId", "platform", "value", "title", "createdAt")
         SELECT p."id", $1::int, p."platform", p."value", p."title", $2::timestamptz AT TIME ZONE 'UTC'
         FROM unnest($3::uuid[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS p("id", "platform", "value", "title", "position")
         ORDER BY p."position"
         ON CONFLICT DO NOTHING`,
        [
          workspaceId,
          new Date().toISOString(),
          inOrder.map(() => randomUUID()),
          inOrder.map((spec) => spec.platform),
          inOrder.map((spec) => spec.value),
          inOrder.map((spec) => spec.title ?? null),
        ],
      )
    }
    const rows = await query<PixelRow>(
      `SELECT "id", "workspaceId", "platform", "value", "title", "createdAt" AT TIME ZONE 'UTC' AS "createdAt" FROM "Pixel"
       WHERE "workspaceId" = $1
         AND ("id" = ANY($2::uuid[])
           OR ("platform", "value") IN (SELECT * FROM unnest($3::text[], $4::text[])))
       ORDER BY "id"
       FOR KEY SHARE`,
      [workspaceId, round === 1 ? ids : [], missing.map((spec) => spec.platform), missing.map((spec) => spec.value)],
    )
    for (const row of rows) {
      byId.set(row.id, row)
      byKey.set(pixelKey(row), row)
    }
    missing = missing.filter((spec) => !byKey.has(pixelKey(spec)))
    if (missing.length === 0 || round === PIXEL_ROUNDS) break
  }
  const resolved = specs.map((spec, index) => {
    if ('id' in spec) {
      const row = byId.get(spec.id)
      if (!row) throw fieldError(`/link/pixels/${index}`, 'is not a pixel of this workspace (it was deleted meanwhile)')
      return row
    }
    const row = byKey.get(pixelKey(spec))
    if (!row) throw fieldError(`/link/pixels/${index}`, 'was renamed or deleted by other requests while this link was being saved; send it again')
    return row
  })
  return [...new Map(resolved.map((row) => [row.id, row])).values()]
}

/** Rounds of resolvePixels before a pixel that keeps being renamed or deleted under it is answered as a 400. */
const PIXEL_ROUNDS = 3

/** Code-unit order: the same in every instance, whatever its locale. */
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * Locks the scripts the link will name, for the same reason and in the same order as its pixels: a script
 * deleted meanwhile is either gone here (400) or taken out of this link by the delete, which waits
 * (src/scripts/script-repository.ts).
 */
async function lockScripts(query: SqlQuery, workspaceId: number, scriptIds: number[] | null | undefined): Promise<void> {
  if (!scriptIds?.length) return
  const rows = await query<{ id: number }>(
    `SELECT "id" FROM "Script" WHERE "workspaceId" = $1 AND "id" = ANY($2::int[]) ORDER BY "id" FOR KEY SHARE`,
    [workspaceId, scriptIds],
  )
  const found = new Set(rows.map((row) => row.id))
  const missing = scriptIds.findIndex((id) => !found.has(id))
  if (missing >= 0) throw fieldError(`/link/linkScripts/${missing}`, 'is not a script of this workspace (it was deleted meanwhile)')
}

/**
 * Stores a new link. Throws P2002 when the slug is taken, P2003 (Link_folderId_fkey) when its folder was
 * deleted since it was checked.
 */
/** A create's Idempotency-Key, stored with the link it makes (IdempotentCreate). */
export interface IdempotentCreateKey {
  key: string
  fingerprint: string
  /** The X-Autofill of the answer. */
  autofill: string
  /** When the key was claimed, on the service's clock (the key store's). */
  at: Date
}

type NewLink = { workspaceId: number; domain: string; slug: string; settings: LinkSettings; idempotency?: IdempotentCreateKey }

/**
 * The INSERT of a create's key row for the link `from` (a statement's alias) returns; a row of the same key older
 * than the key's 24 hours (the only one a create can meet: a live key is answered, not run) is replaced.
 */
const INSERT_KEY_ROWS = `INSERT INTO "IdempotentCreate" ("workspaceId", "key", "fingerprint", "linkUniq", "autofill", "createdAt")`
/** A row left by an attempt past its 24 hours (not swept yet) is the new attempt's. */
const KEY_ROW_TAKEN_OVER = `ON CONFLICT ("workspaceId", "key") DO UPDATE SET "fingerprint" = EXCLUDED."fingerprint", "linkUniq" = EXCLUDED."linkUniq",
         "autofill" = EXCLUDED."autofill", "createdAt" = EXCLUDED."createdAt"`

function idempotentCreateSql(params: unknown[], workspaceId: number, idempotency: IdempotentCreateKey, from: string): string {
  const at = (value: unknown) => `$${params.push(value)}`
  // createdAt in UTC, as Prisma's TIMESTAMP(3) columns hold it.
  return `${INSERT_KEY_ROWS}
       SELECT ${at(workspaceId)}::int, ${at(idempotency.key)}::text, ${at(idempotency.fingerprint)}::text, "uniq", ${at(idempotency.autofill)}::text,
         ${at(idempotency.at.toISOString())}::timestamptz AT TIME ZONE 'UTC' FROM ${from}
       ${KEY_ROW_TAKEN_OVER}`
}

/**
 * The key rows of the links of a batch (insertPlainLinks), each matched to its inserted row by domain and slug;
 * a slug the batch holds twice (a generated one drawn twice) keys only its first link, the one stored.
 */
function idempotentCreatesSql(params: unknown[], links: { workspaceId: number; domain: string; slug: string; idempotency?: IdempotentCreateKey }[]): string {
  const at = (value: unknown) => `$${params.push(value)}`
  const seen = new Set<string>()
  const keys = links.flatMap((link) => {
    const slug = `${link.domain}\u0000${slugKey(link.slug)}`
    if (seen.has(slug)) return []
    seen.add(slug)
    const key = link.idempotency!
    return [
      `(${at(link.workspaceId)}::int, ${at(link.domain)}::text, ${at(slugKey(link.slug))}::text, ${at(key.key)}::text, ${at(key.fingerprint)}::text, ` +
        `${at(key.autofill)}::text, ${at(key.at.toISOString())}::timestamptz AT TIME ZONE 'UTC')`,
    ]
  })
  return `${INSERT_KEY_ROWS}
       SELECT k."workspaceId", k."key", k."fingerprint", i."uniq", k."autofill", k."createdAt"
       FROM inserted i JOIN (VALUES ${keys.join(', ')}) AS k("workspaceId", "domain", "slugKey", "key", "fingerprint", "autofill", "createdAt")
         ON k."domain" = i."domain" AND k."slugKey" = i."slugKey"
       ${KEY_ROW_TAKEN_OVER}`
}

type IdempotentCreate = { fingerprint: string; link: StoredLink; autofill: string }

/**
 * The links creates with these keys made since `since` (the keys' 24 hours) and still there, by key. Every keyed
 * create asks, and almost always finds nothing: the key rows alone, by their primary key, prepared; the links
 * (whose clicks look into the visits) are read only when there are any.
 */
export async function findIdempotentCreates(
  database: Database,
  workspaceId: number,
  keys: string[],
  since: Date,
): Promise<Map<string, IdempotentCreate>> {
  const found = new Map<string, IdempotentCreate>()
  const rows = await database.sql<{ key: string; fingerprint: string; linkUniq: number; autofill: string }>(
    `SELECT "key", "fingerprint", "linkUniq", "autofill" FROM "IdempotentCreate"
     WHERE "workspaceId" = $1 AND "key" = ANY($2::text[]) AND "createdAt" > $3::timestamptz AT TIME ZONE 'UTC'`,
    [workspaceId, keys, since.toISOString()],
    'prepared',
  )
  if (rows.length === 0) return found
  const links = await database.sql<LinkRow>(
    `${LINK_SELECT} WHERE l."uniq" = ANY($1::int[]) AND l."workspaceId" = $2`,
    [rows.map((row) => row.linkUniq), workspaceId],
    'prepared',
  )
  const byUniq = new Map(links.map((row) => [row.uniq, toStoredLink(row)]))
  for (const row of rows) {
    const link = byUniq.get(row.linkUniq)
    if (link) found.set(row.key, { fingerprint: row.fingerprint, autofill: row.autofill, link })
  }
  return found
}

/** Forgets the keys of creates past their 24 hours (findIdempotentCreates ignores them already). */
export async function sweepIdempotentCreates(database: Database): Promise<void> {
  await database.write(`DELETE FROM "IdempotentCreate" WHERE "createdAt" < (now() AT TIME ZONE 'UTC') - interval '24 hours'`)
}

export async function insertLink(database: Database, link: NewLink): Promise<StoredLink> {
  if (isPlainLink(link.settings)) return insertPlainLink(database, link)
  // A connection lost in the transaction may have lost the answer to its COMMIT: the link may be stored.
  return insertWithPixels(database, link).catch((error: unknown) => {
    throw isConnectionLost(error) && !(error instanceof OutcomeUnknownError) ? new OutcomeUnknownError(error) : error
  })
}

/**
 * A link with pixels or scripts: its pixels found or created and locked, its scripts locked, then the link, its
 * pixel list and its Idempotency-Key row in one statement; one transaction of plain SQL (Prisma's interactive
 * transaction and nested create sent ten statements and cost ten times the CPU of a plain create).
 */
function insertWithPixels(database: Database, link: NewLink): Promise<StoredLink> {
  return inSqlTransaction(database, async (query) => {
    const pixels = await resolvePixels(query, link.workspaceId, link.settings.pixels)
    await lockScripts(query, link.workspaceId, link.settings.linkScripts)
    const params: unknown[] = []
    const values = sqlValues(newLinkColumns(link, new Date()), params)
    const pixelIds = `$${params.push(pixels.map((pixel) => pixel.id))}::uuid[]`
    const keyed = link.idempotency ? `, keyed AS (${idempotentCreateSql(params, link.workspaceId, link.idempotency, 'inserted')})` : ''
    const [row] = await query<LinkRow>(
      `WITH inserted AS (
         INSERT INTO "Link" AS l (${values.map((value) => value.name).join(', ')}) VALUES (${values.map((value) => value.placeholder).join(', ')})
         RETURNING ${LINK_COLUMNS}, ${NO_PIXELS_COLUMN}),
       linked AS (
         INSERT INTO "LinkPixel" ("linkUniq", "pixelId", "position")
         SELECT i."uniq", p."id", p."position" - 1 FROM inserted i, unnest(${pixelIds}) WITH ORDINALITY AS p("id", "position"))
       ${keyed}
       SELECT * FROM inserted`,
      params,
    )
    const stored = toStoredLink(row)
    stored.pixels = pixels.map((pixel, position) => ({ linkUniq: stored.uniq, pixelId: pixel.id, position, pixel }))
    return stored
  })
}

/**
 * Applies `changes` to the stored link; null when the link was deleted meanwhile. Throws P2003
 * (Link_folderId_fkey) when the new folder was deleted since it was checked.
 *
 * Concurrent updates of one link run one after the other: the link's row is locked before anything of it
 * changes, so a writer replaces the pixel list another wrote whole (never a merge of the two), and takes
 * its updatedDate only once it holds the lock: the stored updatedDate follows commit order.
 *
 * `fill` is what autofill found for fields the request left alone: each is written only if the field is still
 * empty then. The page was fetched after the link was read, and another update may have set the field meanwhile;
 * autofill never overwrites a value (contract section 12).
 */
export async function updateLink(
  database: Database,
  link: StoredLink,
  changes: Partial<LinkSettings>,
  fill: PageMetadata = {},
): Promise<StoredLink | null> {
  const prisma = database.prisma
  const grouped = changesGroups(changes)
  if (changes.pixels === undefined && !changes.linkScripts?.length) {
    return linkWriters(prisma).run(link.uniq, TRANSACTION_OPTIONS.timeout, () =>
      grouped ? updateGroupedLink(database, link.uniq, changes, fill) : updatePlainLink(database.sql, link.uniq, changes, fill),
    )
  }
  const update = () => inSqlTransaction(database, async (query) => {
    const pixels = changes.pixels === undefined ? undefined : await resolvePixels(query, link.workspaceId, changes.pixels)
    await lockScripts(query, link.workspaceId, changes.linkScripts)
    // The rollup's row before the link's (group-history.ts), only when the link may change groups.
    if (grouped) await lockRollup(query)
    // FOR NO KEY UPDATE: the lock the UPDATE below would take anyway, taken first; the groups as they are now.
    const [locked] = await query<GroupedLink>(`SELECT ${GROUPED_LINK_COLUMNS} FROM "Link" WHERE "uniq" = $1 FOR NO KEY UPDATE`, [link.uniq])
    // Thrown, not returned: the pixels created above for this link must go with it.
    if (!locked) throw new LinkGone()
    if (pixels !== undefined) {
      await query(`DELETE FROM "LinkPixel" WHERE "linkUniq" = $1`, [link.uniq])
      await query(
        `INSERT INTO "LinkPixel" ("linkUniq", "pixelId", "position")
         SELECT $1::int, p."id", p."position" - 1 FROM unnest($2::uuid[]) WITH ORDINALITY AS p("id", "position")`,
        [link.uniq, pixels.map((pixel) => pixel.id)],
      )
    }
    // The link's row is locked: what autofill found is written where the field is empty now (updatePlainLink).
    const updated = (await updatePlainLink(query, link.uniq, changes, fill))!
    if (grouped) await moveGroupHistory(query, [{ before: locked, after: updated }])
    return updated
  })
  return linkWriters(prisma).run(link.uniq, TRANSACTION_OPTIONS.timeout, async () => {
    try {
      return await update()
    } catch (error) {
      if (error instanceof LinkGone) return null
      throw error
    }
  })
}

/** Rolls back the transaction of an update whose link was deleted meanwhile (updateLink answers null). */
class LinkGone extends Error {}

/**
 * An update of plain columns in one statement, without reading the link first (see updateWithoutReading in
 * link-service.ts): the columns are set, and updatedDate moves only when one of them differs from what was stored
 * (an update that repeats the stored values changes nothing, contract section 7). `domain` and `slugKey`, when
 * given, must match too (a body may repeat the link's own). Null when no link of the workspace matches.
 */
export async function updateLinkColumns(
  database: Database,
  where: { uniq: number; workspaceId: number; domain?: string; slugKey?: string; notOnDomains?: readonly string[] },
  changes: Partial<LinkSettings>,
): Promise<StoredLink | null> {
  return linkWriters(database.prisma).run(where.uniq, TRANSACTION_OPTIONS.timeout, async () => {
    const params: unknown[] = [where.uniq, where.workspaceId]
    const values = sqlValues(columns(changes) as Record<string, unknown>, params)
    const conditions = ['l."uniq" = $1', 'l."workspaceId" = $2']
    if (where.domain !== undefined) conditions.push(`l."domain" = $${params.push(where.domain)}`)
    if (where.slugKey !== undefined) conditions.push(`l."slugKey" = $${params.push(where.slugKey)}`)
    if (where.notOnDomains?.length) conditions.push(`l."domain" <> ALL($${params.push(where.notOnDomains)}::text[])`)
    const now = `$${params.push(new Date().toISOString())}::timestamp(3)`
    const changed = values.map((value) => `l.${value.name} IS DISTINCT FROM ${value.placeholder}`).join(' OR ')
    const row = await untilAsSeen((guard) =>
      database.sql<LinkRow>(
        `UPDATE "Link" AS l SET ${values.map((value) => `${value.name} = ${value.placeholder}`).join(', ')},
           "updatedAt" = CASE WHEN ${changed} THEN GREATEST(${now}, l."updatedAt") ELSE l."updatedAt" END
         WHERE ${conditions.join(' AND ')}${guard}
         RETURNING ${LINK_COLUMNS}, ${PIXELS_COLUMN}, ${CLICKS_COLUMN}`,
        params,
        'prepared',
      ),
    )
    return row ? toStoredLink(row) : null
  })
}

/**
 * A plain update of the link's tags or folder: the same UPDATE, in a transaction that holds the rollup's row and
 * moves the link's history between its groups, old ones as locked here (group-history.ts).
 */
function updateGroupedLink(database: Database, uniq: number, changes: Partial<LinkSettings>, fill: PageMetadata): Promise<StoredLink | null> {
  return database.transaction(async (query) => {
    await lockRollup(query)
    const [before] = await query<GroupedLink>(`SELECT ${GROUPED_LINK_COLUMNS} FROM "Link" WHERE "uniq" = $1 FOR NO KEY UPDATE`, [uniq])
    if (!before) return null
    const updated = await updatePlainLink(query, uniq, changes, fill)
    if (updated) await moveGroupHistory(query, [{ before, after: updated }])
    return updated
  })
}

/**
 * The writers of each link, one at a time per instance (see keyed-queue.ts), per database: tests run several
 * apps, each on its own, in one process. A writer waits for its turn at most as long as it could wait for the
 * row lock inside a transaction (its timeout), then it is a 503.
 */
const writersByDatabase = new WeakMap<PrismaClient, KeyedQueue<number>>()
function linkWriters(prisma: PrismaClient): KeyedQueue<number> {
  let writers = writersByDatabase.get(prisma)
  if (!writers) writersByDatabase.set(prisma, (writers = new KeyedQueue()))
  return writers
}

/** What the list can be narrowed by; every field but workspaceId is optional. */
export interface LinkFilter {
  workspaceId: number
  /** Only links older than this uniq: the position of the page (keyset pagination). */
  beforeUniq?: number
  domain?: string
  folderId?: number
  /** Lower-case tags that must all be present. */
  tagKeys?: string[]
  /** Case-insensitive substring of the slug, url, title or note. */
  search?: string
  createdFrom?: Date
  createdBefore?: Date
}

/** A LIKE pattern matches `%` and `_` as wildcards; a search for them must find them literally. */
function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (character) => `\\${character}`)
}

/**
 * The most rows a page reads: the largest page and the one more that tells whether another follows. A literal
 * in the statement of the unfiltered pages (findLinksPage).
 */
const PAGE_ROWS_AT_MOST = LIST_LIMIT.max + 1

/** Up to `take` links of the filter, newest first: uniq DESC, an order the primary key and (workspaceId, uniq DESC) give unsorted. */
export async function findLinksPage(database: Database, filter: LinkFilter, take: number): Promise<StoredLink[]> {
  if (isWorkspacePage(filter) && take <= PAGE_ROWS_AT_MOST) return findWorkspacePage(database, filter, take)
  const params: unknown[] = [filter.workspaceId]
  const where = ['l."workspaceId" = $1']
  const param = (value: unknown) => {
    params.push(value)
    return `$${params.length}`
  }
  if (filter.beforeUniq !== undefined) where.push(`l."uniq" < ${param(filter.beforeUniq)}`)
  if (filter.domain !== undefined) where.push(`l."domain" = ${param(filter.domain)}`)
  if (filter.folderId !== undefined) where.push(`l."folderId" = ${param(filter.folderId)}`)
  if (filter.tagKeys?.length) where.push(`l."tagKeys" @> ${param(filter.tagKeys)}::text[]`)
  if (filter.createdFrom) where.push(`l."createdAt" >= ${param(filter.createdFrom.toISOString())}::timestamp(3)`)
  if (filter.createdBefore) where.push(`l."createdAt" < ${param(filter.createdBefore.toISOString())}::timestamp(3)`)
  if (filter.search) {
    const pattern = param(`%${likeLiteral(filter.search)}%`)
    where.push(`(l."slug" ILIKE ${pattern} OR l."url" ILIKE ${pattern} OR l."title" ILIKE ${pattern} OR l."note" ILIKE ${pattern})`)
  }
  const rows = await database.sql<LinkRow>(`${LINK_SELECT} WHERE ${where.join(' AND ')} ORDER BY l."uniq" DESC LIMIT ${param(take)}`, params, 'prepared')
  return rows.map(toStoredLink)
}

/** A page of the whole workspace, the first or one after a cursor: the list's commonest question. */
function isWorkspacePage(filter: LinkFilter): boolean {
  return filter.domain === undefined && filter.folderId === undefined && !filter.tagKeys?.length && !filter.search &&
    filter.createdFrom === undefined && filter.createdBefore === undefined
}

/**
 * A page of the whole workspace in a statement PostgreSQL plans once per connection. Written as the other pages
 * are, with the page's size a parameter, it was planned again on every call: a generic plan assumes a LIMIT of
 * unknown size reads a tenth of the workspace, and with each row's pixels and clicks (subqueries into every
 * partition of the visits) that plan looked far costlier than one made for the actual size, so PostgreSQL kept
 * making those, and planning was two thirds of the statement's time. Here the page's uniqs come first, at most
 * PAGE_ROWS_AT_MOST of them, from the (workspaceId, uniq DESC) index alone; the rows are read by key and the outer
 * LIMIT stops the pixels and clicks at `take` rows. The uniqs are ordered by (workspaceId, uniq DESC), with the
 * workspace as `= ANY(ARRAY[$1])`, which PostgreSQL does not take for a constant: that order is the index's alone,
 * so the plan it keeps for every workspace cannot walk the primary key backwards past the newer links of the
 * others instead, as one for `uniq DESC` did on a table of few workspaces (review lists: 60 ms a page against 1).
 */
async function findWorkspacePage(database: Database, filter: LinkFilter, take: number): Promise<StoredLink[]> {
  const params: unknown[] = [filter.workspaceId, take]
  const before = filter.beforeUniq === undefined ? '' : `AND k."uniq" < $${params.push(filter.beforeUniq)}`
  const rows = await database.sql<LinkRow>(
    `${LINK_SELECT} WHERE l."workspaceId" = $1 AND l."uniq" = ANY(ARRAY(
       SELECT k."uniq" FROM "Link" k WHERE k."workspaceId" = ANY(ARRAY[$1::int]) ${before}
       ORDER BY k."workspaceId", k."uniq" DESC LIMIT ${PAGE_ROWS_AT_MOST}))
     ORDER BY l."uniq" DESC LIMIT $2`,
    params,
    'prepared',
  )
  return rows.map(toStoredLink)
}

/**
 * Deletes a link that is in no group (no tag, no folder), found by uniq or by domain and slug, in one statement,
 * and answers which it was; null when there is none such: no such link, or one in a group, whose delete moves its
 * group history (deleteLinkByUniq). Such a link has no history to move, so the rollup's row is not taken: taking
 * it would make every delete take turns with the others and wait for a rollup under way. Should a change give the
 * link a tag or folder meanwhile, PostgreSQL checks the condition again on the changed row and deletes nothing.
 * A link on one of `notOnDomains` is left for the caller to refuse (null).
 */
export async function deletePlainLink(
  database: Database,
  workspaceId: number,
  locator: { uniq: number } | { domain: string; slug: string },
  notOnDomains: readonly string[] = [],
): Promise<{ uniq: number; domain: string; slug: string } | null> {
  const [where, params]: [string, unknown[]] =
    'uniq' in locator
      ? [`"uniq" = $1 AND "workspaceId" = $2`, [locator.uniq, workspaceId]]
      : [`"domain" = $1 AND "slugKey" = $2 AND "workspaceId" = $3`, [locator.domain, slugKey(locator.slug), workspaceId]]
  const barred = notOnDomains.length > 0 ? ` AND "domain" <> ALL($${params.push(notOnDomains)}::text[])` : ''
  const [row] = await database.sql<{ uniq: number; domain: string; slug: string }>(
    `DELETE FROM "Link" WHERE ${where}${barred} AND ${IN_NO_GROUP_SQL} RETURNING "uniq", "domain", "slug"`,
    params,
    'prepared',
  )
  return row ?? null
}

/**
 * Deletes the link (its link–pixel rows cascade); false when it was already gone. Its history leaves its groups
 * in the same transaction, under the rollup's lock (group-history.ts); its own aggregates stay until they expire.
 */
export async function deleteLinkByUniq(database: Database, workspaceId: number, uniq: number): Promise<boolean> {
  return database.transaction(async (query) => {
    await lockRollup(query)
    const [gone] = await query<GroupedLink>(
      `DELETE FROM "Link" WHERE "uniq" = $1 AND "workspaceId" = $2 RETURNING ${GROUPED_LINK_COLUMNS}`,
      [uniq, workspaceId],
    )
    if (gone) await moveGroupHistory(query, [{ before: gone, after: null }])
    return gone !== undefined
  })
}
