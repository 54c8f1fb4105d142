/**
 * The redirect view of a link: the compact, read-only part of a link that the visitor side needs, read with
 * one indexed statement (with the other links asked for at the same moment) and kept in the in-process cache
 * (redirect-cache.ts).
 */
import type { Database } from '../db/database.js'
import { headerSafeUrl, type DestinationRules, type RotatorTarget, type Target } from './destination.js'

export interface RedirectView extends DestinationRules {
  uniq: number
  workspaceId: number
  domain: string
  slug: string
  title: string | null
  description: string | null
  image: string | null
  favicon: string | null
  showGDPR: boolean
  deepLinkingEnable: boolean
  masking: boolean
  /** Milliseconds since the epoch; null when the link never expires. */
  expiresAt: number | null
  /** Where an expired link sends visitors (header-safe, see headerSafeUrl); null: the 410 page. */
  expirationUrl: string | null
  /** The scrypt hash when password protection is on, else null. */
  passwordHash: string | null
  pixels: { platform: string; value: string }[]
  /** The content of the link's scripts, in the link's order; empty unless linkScriptEnable. */
  scripts: { id: number; content: string }[]
  /** A rough size in bytes, for the cache's memory bound. */
  size: number
}

interface ViewRow {
  uniq: number
  workspaceId: number
  domain: string
  slug: string
  slugKey: string
  url: string
  title: string | null
  description: string | null
  image: string | null
  favicon: string | null
  geolocations: string
  rotator: string
  showGDPR: boolean
  deepLinkingEnable: boolean
  masking: boolean
  expiresAt: number | null
  expirationUrl: string | null
  passwordHash: string | null
  pixels: string
  scripts: string
}

/**
 * One statement for everything the visits of several links may need, sent through the driver (Database.query),
 * not Prisma: each link by the unique index on (domain, slugKey), its pixels and, when it uses them, its
 * scripts' content (they can be 64 KiB each). JSON columns and aggregates come back as text and are parsed here,
 * so both drivers give the same values; the expiry comes as epoch milliseconds (the column holds UTC, no zone).
 */
const VIEWS_SQL = `
  SELECT l."uniq", l."workspaceId", l."domain", l."slug", l."slugKey", l."url", l."title", l."description", l."image",
    l."favicon", l."geolocations"::text AS "geolocations", l."linkRotator"::text AS "rotator",
    l."showGDPR", l."deepLinkingEnable", l."masking",
    CASE WHEN l."expirationEnable" THEN (extract(epoch FROM l."expiresAt") * 1000)::float8 END AS "expiresAt",
    NULLIF(l."expirationUrl", '') AS "expirationUrl",
    CASE WHEN l."passwordEnable" THEN l."passwordHash" END AS "passwordHash",
    COALESCE((
      SELECT json_agg(json_build_object('platform', p."platform", 'value', p."value") ORDER BY lp."position")
      FROM "LinkPixel" lp JOIN "Pixel" p ON p."id" = lp."pixelId"
      WHERE lp."linkUniq" = l."uniq"
    ), '[]')::text AS "pixels",
    CASE WHEN l."linkScriptEnable" AND jsonb_typeof(l."linkScripts") = 'array' THEN COALESCE((
      SELECT json_agg(json_build_object('id', s."id", 'content', s."content") ORDER BY e."position")
      FROM jsonb_array_elements_text(l."linkScripts") WITH ORDINALITY AS e("id", "position")
      JOIN "Script" s ON s."id" = e."id"::int AND s."workspaceId" = l."workspaceId"
    ), '[]') ELSE '[]' END::text AS "scripts"
  FROM unnest($1::text[], $2::text[]) AS k("domain", "slugKey")
  JOIN "Link" l ON l."domain" = k."domain" AND l."slugKey" = k."slugKey"`

export interface ViewKey {
  domain: string
  slugKey: string
}

/** The key of a link in the caches and batches: `<domain>/<slugKey>` (a host has no "/"). */
export const cacheKey = (domain: string, slugKey: string) => `${domain}/${slugKey}`

/** The views of the links that exist among `keys`, by `<domain>/<slugKey>` (see cacheKey). */
export async function loadRedirectViews(database: Database, keys: ViewKey[]): Promise<Map<string, RedirectView>> {
  const rows = await database.query<ViewRow>(VIEWS_SQL, [keys.map((key) => key.domain), keys.map((key) => key.slugKey)], 'prepared')
  return new Map(rows.map((row) => [cacheKey(row.domain, row.slugKey), toView(row)]))
}

/**
 * Reads views in batches: the links asked for during one turn of the event loop (the requests whose bytes
 * arrived together) are read with one statement, and while `maxInFlight` statements are under way the links
 * asked for meanwhile wait for one of them to finish and go together in the next. Under load, a round trip and
 * its system calls (which cost more than the statement itself) serve many cold visits; alone, a visit waits
 * for the end of the turn only.
 */
export function batchedViewReader(
  readMany: (keys: ViewKey[]) => Promise<Map<string, RedirectView>>,
  { maxBatch = 64, maxInFlight = 2 }: { maxBatch?: number; maxInFlight?: number } = {},
): (domain: string, slugKey: string) => Promise<RedirectView | null> {
  type Waiting = { key: ViewKey; resolve: (view: RedirectView | null) => void; reject: (error: unknown) => void }
  let pending: Waiting[] = []
  let inFlight = 0
  let flushScheduled = false
  const send = (batch: Waiting[]) => {
    inFlight++
    readMany(batch.map((entry) => entry.key))
      .then(
        (views) => {
          for (const entry of batch) entry.resolve(views.get(cacheKey(entry.key.domain, entry.key.slugKey)) ?? null)
        },
        (error: unknown) => {
          for (const entry of batch) entry.reject(error)
        },
      )
      .finally(() => {
        inFlight--
        flush()
      })
  }
  const flush = () => {
    flushScheduled = false
    while (pending.length > 0 && inFlight < maxInFlight) {
      send(pending.slice(0, maxBatch))
      pending = pending.slice(maxBatch)
    }
  }
  return (domain, slugKey) =>
    new Promise((resolve, reject) => {
      pending.push({ key: { domain, slugKey }, resolve, reject })
      if (!flushScheduled && inFlight < maxInFlight) {
        flushScheduled = true
        setImmediate(flush)
      }
    })
}

const target = (url: string): Target => ({ url, location: headerSafeUrl(url) })

function toView(row: ViewRow): RedirectView {
  const geolocations = new Map<string, Target>()
  for (const rule of JSON.parse(row.geolocations) as { url: string; value: string }[]) {
    // Stored upper case and unique; the first rule of a code wins should that ever change.
    const code = rule.value.toUpperCase()
    if (!geolocations.has(code)) geolocations.set(code, target(rule.url))
  }
  const rotator: RotatorTarget[] = (JSON.parse(row.rotator) as { url: string; value: number }[]).map((entry) => ({
    ...target(entry.url),
    weight: Number(entry.value),
  }))
  const pixels = JSON.parse(row.pixels) as RedirectView['pixels']
  const scripts = JSON.parse(row.scripts) as RedirectView['scripts']
  const text = [row.url, row.title, row.description, row.image, row.favicon, row.expirationUrl, row.passwordHash]
  const size =
    256 +
    2 * (text.reduce((sum, value) => sum + (value?.length ?? 0), 0) + row.geolocations.length + row.rotator.length +
      row.pixels.length + row.scripts.length)
  return {
    uniq: row.uniq,
    workspaceId: row.workspaceId,
    domain: row.domain,
    slug: row.slug,
    target: target(row.url),
    geolocations,
    rotator,
    title: row.title,
    description: row.description,
    image: row.image,
    favicon: row.favicon,
    showGDPR: row.showGDPR,
    deepLinkingEnable: row.deepLinkingEnable,
    masking: row.masking,
    expiresAt: row.expiresAt,
    expirationUrl: row.expirationUrl === null ? null : headerSafeUrl(row.expirationUrl),
    passwordHash: row.passwordHash,
    pixels,
    scripts,
    size,
  }
}
