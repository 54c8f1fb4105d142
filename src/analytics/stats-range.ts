/**
 * The range of a stats request: from and to (rounded to whole hours, since the aggregates are hourly), the
 * time zone the buckets follow, and the interval. Everything the client can get wrong is a 400 naming the field.
 */
import { MAX_POINTS, MAX_RANGE_DAYS, type Interval } from '../../schemas/stats.js'
import { instantOf } from '../../schemas/formats.js'
import { fieldError } from '../errors/app-error.js'
import { LRUCache } from 'lru-cache'

const HOUR = 3_600_000
const DAY = 24 * HOUR
const DEFAULT_DAYS = 30

export interface StatsRange {
  /** Rounded down to the hour: the first hour counted. */
  from: Date
  /** Rounded up to the hour: the first hour not counted. */
  to: Date
  /** The canonical IANA name, as PostgreSQL and Intl both know it. */
  timezone: string
  interval: Interval
}

export interface InstantBounds {
  earliest: number
  latest: number
  /** How the bounds read in a 400. */
  text: string
}

/**
 * The instants a stats range may name. The format allows years 0000 to 9999 in any offset, but PostgreSQL has no
 * year 0 and reads no five-digit year as JavaScript writes it, which a bound near the end would become once
 * rounded up to the hour or moved to its time zone; no visit is older than 1970 either.
 */
export const STATS_INSTANTS: InstantBounds = {
  earliest: Date.UTC(1970, 0, 1),
  latest: Date.UTC(9999, 11, 31),
  text: 'between 1970-01-01T00:00:00Z and 9999-12-31T00:00:00Z',
}

/** The digits of an instant's fraction past the millisecond, which a Date drops ("…28.90790Z": "9"). */
const pastMillisecond = (value: string) => /[.,]\d{3}(\d+)/.exec(value)?.[1].replace(/0+$/, '') ?? ''

/**
 * An instant given by the client; the format check lets through what a Date cannot hold (23:59:60). A Date holds
 * milliseconds: an instant between two is rounded up to the next, which is exact against stored times of
 * milliseconds (links, the visits the service records) for an inclusive lower bound and an exclusive upper one.
 * (Not past the latest bound, which the database's range ends at.) exactInstant keeps the microseconds.
 */
export function parseInstant(value: string | undefined, path: string, bounds: InstantBounds = STATS_INSTANTS): Date | undefined {
  if (value === undefined) return undefined
  const instant = instantOf(value)
  if (Number.isNaN(instant.getTime())) throw fieldError(path, 'must be an ISO 8601 date-time')
  if (instant.getTime() < bounds.earliest || instant.getTime() > bounds.latest) throw fieldError(path, `must be ${bounds.text}`)
  return pastMillisecond(value) ? new Date(Math.min(instant.getTime() + 1, bounds.latest)) : instant
}

/**
 * A valid instant (parseInstant) in UTC to the microsecond, as PostgreSQL stores visits: digits past it round up,
 * by the rule of parseInstant (PostgreSQL would round them to the nearest). Fixed width: two compare as text.
 */
export function exactInstant(value: string): string {
  const extra = pastMillisecond(value)
  let millisecond = instantOf(value).getTime()
  let micros = Number(extra.slice(0, 3).padEnd(3, '0')) + (/[1-9]/.test(extra.slice(3)) ? 1 : 0)
  if (micros === 1000) {
    millisecond++
    micros = 0
  }
  return `${new Date(millisecond).toISOString().slice(0, 23)}${String(micros).padStart(3, '0')}Z`
}

/**
 * An IANA zone name. Intl decides whether it exists; the pattern keeps out what Intl may accept but PostgreSQL
 * reads differently: an offset like "+01:00" is a POSIX zone there, with its sign the other way round.
 * The answer names the zone as ICU spells it ("america/new_york" becomes "America/New_York"), except where ICU
 * would swap a name written as the time-zone database writes them (each part capitalised) for an older alias of
 * the same zone (Asia/Kolkata is Asia/Calcutta to ICU): then the client's own name is kept, as PostgreSQL knows
 * both. ("asia/kolkata" has no spelling to keep: ICU's is given.) Only an Area/Location name is kept so: ICU also
 * takes the old three-letter ids (IST, PST, ACT) as zones, which PostgreSQL reads as abbreviations of other, fixed
 * offsets (IST is +02:00 there, Asia/Calcutta to ICU), so their buckets would be cut in one zone and named in
 * another; they are answered, and queried, by ICU's name.
 */
export function parseTimezone(value: string | undefined): string {
  if (value === undefined) return 'UTC'
  const invalid = () => fieldError('/timezone', 'must be an IANA time zone name, such as Europe/Paris or UTC')
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(value)) throw invalid()
  let resolved = resolvedZones.get(value)
  if (resolved === undefined) {
    try {
      resolved = new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone
    } catch {
      throw invalid()
    }
    resolvedZones.set(value, resolved)
  }
  if (resolved.toLowerCase() === value.toLowerCase()) return resolved
  return /^[A-Z][^/]*(\/[A-Z][^/]*)+$/.test(value) ? value : resolved
}

/**
 * What ICU resolved each spelling to: a formatter costs some 30 KB outside the heap, so one is made per spelling
 * not seen lately, not per request. Bounded, as spellings are the client's.
 */
const resolvedZones = new LRUCache<string, string>({ max: 1000 })

const floorHour = (at: Date) => new Date(Math.floor(at.getTime() / HOUR) * HOUR)
const ceilHour = (at: Date) => new Date(Math.ceil(at.getTime() / HOUR) * HOUR)

/** The shortest a bucket of each interval can be (a day loses an hour to DST, February has 28 days). */
const SHORTEST: Record<Interval, number> = { hour: HOUR, day: DAY - HOUR, week: 7 * DAY - HOUR, month: 28 * DAY - HOUR }

export function parseRange(query: { from?: string; to?: string; timezone?: string; interval?: Interval }, now: Date): StatsRange {
  const timezone = parseTimezone(query.timezone)
  const interval = query.interval ?? 'day'
  const givenTo = parseInstant(query.to, '/to')
  const givenFrom = parseInstant(query.from, '/from')
  const to = ceilHour(givenTo ?? now)
  const from = floorHour(givenFrom ?? new Date(to.getTime() - DEFAULT_DAYS * DAY))
  if (givenFrom && givenTo && exactInstant(query.from!) >= exactInstant(query.to!)) throw fieldError('/from', 'must be before to')
  if (from.getTime() >= to.getTime()) throw fieldError('/from', 'must be before to')
  // The limit holds for the range as asked (without a `to`, until now); rounding to whole hours may add up to two.
  if ((givenTo ?? now).getTime() - (givenFrom ?? from).getTime() > MAX_RANGE_DAYS * DAY) {
    throw fieldError(givenFrom ? '/from' : '/to', `must be at most ${MAX_RANGE_DAYS} days from the other end of the range`)
  }
  // A first bound before asking PostgreSQL for the exact buckets: far too many is refused without a query.
  if ((to.getTime() - from.getTime()) / SHORTEST[interval] > MAX_POINTS + 2) throw tooManyPoints(interval)
  return { from, to, timezone, interval }
}

export const tooManyPoints = (interval: Interval) =>
  fieldError('/interval', `gives more than ${MAX_POINTS} buckets over this range; choose a longer interval or a shorter range`)

/** One formatter per zone answered lately (some 30 KB each, outside the heap): bounded, zones are the client's. */
const offsetFormats = new LRUCache<string, Intl.DateTimeFormat>({ max: 200 })

/** How many spellings and formatters of zones are held (tests). */
export const zoneCacheSizes = () => ({ spellings: resolvedZones.size, formats: offsetFormats.size })

/**
 * An instant as RFC 3339 in the zone, with its offset there: 2026-10-25T00:00:00+02:00. An offset of seconds (local
 * mean times, before 1972 in Africa/Monrovia) has no RFC 3339 form: it is rounded to the minute, and the local time
 * written at that offset, so the text still names the exact instant.
 */
export function formatInZone(at: Date, timezone: string): string {
  let format = offsetFormats.get(timezone)
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
      timeZoneName: 'longOffset',
    })
    offsetFormats.set(timezone, format)
  }
  const parts = Object.fromEntries(format.formatToParts(at).map((part) => [part.type, part.value]))
  // "GMT+05:30", "GMT-00:44:30", or "GMT" alone for a zero offset.
  const offset = parts.timeZoneName === 'GMT' ? '+00:00' : parts.timeZoneName.slice(3)
  if (offset.length > '+00:00'.length) return atOffset(at, offset)
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${offset}`
}

/** `at` written at `offset` ("-00:44:30") rounded to the minute. */
function atOffset(at: Date, offset: string): string {
  const [hours, minutes, seconds] = offset.slice(1).split(':').map(Number)
  const sign = offset.startsWith('-') ? -1 : 1
  const offsetMinutes = sign * Math.round(hours * 60 + minutes + seconds / 60)
  const local = new Date(at.getTime() + offsetMinutes * 60_000).toISOString().slice(0, 19)
  const size = Math.abs(offsetMinutes)
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${local}${offsetMinutes < 0 ? '-' : '+'}${pad(Math.floor(size / 60))}:${pad(size % 60)}`
}
