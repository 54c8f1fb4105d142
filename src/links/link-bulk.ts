/**
 * POST /v1/links/bulk: up to MAX_BULK_LINKS creates in one request. Each link goes through the create's own
 * rules (schema, field rules, domain, slug) on its own, and its result takes its place in the answer: the stored
 * link, or the problem a single create would have answered, its field errors named `/links/<index>/<field>`.
 *
 * Quota: each link that is created counts as one create. The slots are reserved once the links are checked,
 * all together and in order (src/plugins/rate-limits.ts reserveMany), so a batch larger than what is left
 * creates the links that fit and answers rate_limited for the rest; the slots of links that then fail (a slug
 * taken) are given back.
 *
 * A slug asked for twice in one batch goes to the first of its links (the others: slug_taken, before any slot is
 * reserved).
 *
 * Storage: the links without pixels or scripts in one multi-row INSERT (a taken generated slug is drawn again
 * one by one), the others one by one as a single create stores them.
 *
 * Idempotency-Key: each link of a keyed batch is stored with a key row of its own (bulkItemKey), in the same
 * statement or transaction, so an attempt whose answer never came (a lost connection, a dead instance) left a
 * trace of exactly what it stored. The key's retry answers those links as they are now and creates the others
 * (their checks and quota as for a first attempt): no link is made twice.
 */
import type { ValidateFunction } from 'ajv'
import { Type } from '@sinclair/typebox'
import type { LinkInputBody } from '../../schemas/link.js'
import { LinkInput } from '../../schemas/link.js'
import type { ProblemBody } from '../../schemas/problem.js'
import type { BulkCreateRequest } from '../../schemas/link-bulk.js'
import { AppError, slugTaken, validationFailed } from '../errors/app-error.js'
import { OutcomeUnknownError } from '../db/errors.js'
import type { Caller } from '../plugins/auth.js'
import { clientDataProblems } from '../plugins/client-data.js'
import { compileBodyValidator, fieldErrors } from '../plugins/validation.js'
import type { BulkReservation } from '../plugins/rate-limits.js'
import { DEFAULT_SETTINGS, hashNewPassword, type LinkSettings } from './link-input.js'
import { insertPlainLinks, isPlainLink, slugsInUse, type StoredLink } from './link-repository.js'
import { checkNewLink, folderGone, insertWithSlug, type LinkServiceContext } from './link-service.js'
import { generateSlug, slugKey } from './slug.js'

/** What the create's schema checks of `link`, for one link of the batch at a time. */
let validateOne: ValidateFunction | undefined
const linkValidator = () => (validateOne ??= compileBodyValidator(Type.Object({ link: Type.Ref(LinkInput) })))

/** Autofill fetches under way at once for one request. */
const AUTOFILL_CONCURRENCY = 8
/** New passwords hashed at once for one request (scrypt runs on libuv's pool of four threads). */
const PASSWORD_HASH_CONCURRENCY = 2

/** `work` for each item in order, at most `size` at a time: the next starts as soon as any one finishes. */
async function atMost<T>(size: number, items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  let failed = false
  const worker = async () => {
    // Once one has failed (the request fails with it), the others start nothing new.
    while (!failed && next < items.length) {
      await work(items[next++]).catch((error: unknown) => {
        failed = true
        throw error
      })
    }
  }
  await Promise.all(Array.from({ length: Math.min(size, items.length) }, worker))
}

export type BulkItemResult = { status: 201; link: StoredLink } | { status: number; problem: ProblemBody }

/** The problem of one link, its field paths moved from /link/… to /links/<index>/…. */
function itemProblem(error: AppError, index: number): { status: number; problem: ProblemBody } {
  const problem = error.toProblem()
  // The detail names fields without the leading slash: "link/url must be …; link/tags/3 …".
  const move = (text: string) => text.replace(/(^|; )link(?=\/| )/g, `$1links/${index}`)
  return {
    status: error.status,
    problem: {
      ...problem,
      detail: move(problem.detail),
      ...(problem.errors ? { errors: problem.errors.map((field) => ({ ...field, path: field.path.replace(/^\/link(?=\/|$)/, `/links/${index}`) })) } : {}),
    },
  }
}

interface Prepared {
  index: number
  link: LinkInputBody
  domain: string
  settings: LinkSettings
  /** The X-Autofill a single create of this link would answer (kept with its key row). */
  autofill: string
}

/** A batch sent with an Idempotency-Key. */
export interface BulkIdempotency {
  key: string
  fingerprint: string
  /** When the key was claimed, on the key store's clock. */
  at: Date
  /** The links an earlier attempt with this key stored, by their index in the batch. */
  earlier: Map<number, StoredLink>
}

/** The key row of link `index` of a keyed batch. An Idempotency-Key (an sf-string) holds no tab: never a single create's. */
export const bulkItemKey = (key: string, index: number) => `${key}\t${index}`

/**
 * Runs the storing of the batch (its statements): in one of the instance's places for bulk creates
 * (src/links/bulk-slots.ts), so that only so many batches take memory and the database at once.
 */
export type InPlace = <T>(work: () => Promise<T>) => Promise<T>

export async function createLinks(
  context: LinkServiceContext,
  caller: Caller,
  request: BulkCreateRequest,
  reserve: (count: number) => Promise<BulkReservation>,
  idempotency?: BulkIdempotency,
  inPlace: InPlace = (work) => work(),
): Promise<BulkItemResult[]> {
  const results: BulkItemResult[] = new Array(request.links.length)
  const fail = (index: number, error: unknown) => {
    if (!(error instanceof AppError)) throw error
    results[index] = itemProblem(error, index)
  }
  for (const [index, link] of idempotency?.earlier ?? []) results[index] = { status: 201, link }
  const keyOf = (item: Prepared) =>
    idempotency && { key: bulkItemKey(idempotency.key, item.index), fingerprint: idempotency.fingerprint, autofill: item.autofill, at: idempotency.at }

  // Each link checked as a single create checks it, all at once (their reads share the pool).
  const checked = await Promise.all(
    request.links.map(async (link, index): Promise<Prepared | undefined> => {
      if (idempotency?.earlier.has(index)) return undefined
      try {
        const body = { link }
        // What the route's hook checks on a single create's body (src/plugins/validation.ts), for this link alone.
        const found = clientDataProblems(body)
        if (found.total > 0) throw validationFailed(found.problems, found.total)
        const validate = linkValidator()
        if (!validate(body)) throw validationFailed(fieldErrors(validate.errors ?? []))
        const { parsed, domain } = await checkNewLink(context, caller, link)
        return { index, link, domain, settings: { ...DEFAULT_SETTINGS, ...parsed, url: link.url }, autofill: 'skipped' }
      } catch (error) {
        fail(index, error)
        return undefined
      }
    }),
  )
  // A slug the batch asks for twice (in any case) goes to its first link in the batch's order; the later ones are
  // answered slug_taken now, as a later single create would be, and take no slot of the quota. So are slugs already
  // taken (one statement for the batch): their slots would be held through the autofill of the others, refusing
  // other creates meanwhile; the insert still decides for slugs taken after this look.
  const asked = checked.flatMap((item) => (item?.link.id === undefined ? [] : [{ domain: item.domain, slugKey: slugKey(item.link.id) }]))
  const taken = await slugsInUse(context.database, asked)
  const claimed = new Set<string>()
  const valid = checked.filter((item): item is Prepared => {
    if (item === undefined) return false
    if (item.link.id === undefined) return true
    const key = `${item.domain}/${slugKey(item.link.id)}`
    if (claimed.has(key) || taken.has(key)) {
      fail(item.index, slugTaken(item.domain, item.link.id))
      return false
    }
    claimed.add(key)
    return true
  })
  if (valid.length === 0) return results

  const reservation = await reserve(valid.length)
  const admitted = valid.slice(0, reservation.granted)
  for (const item of valid.slice(reservation.granted)) fail(item.index, reservation.refused)

  let created = 0
  /** Links sent to the database and not answered yet: should the connection break, they may be stored. */
  let sending = 0
  /** Whether the failure left the links being sent unknown (a connection lost), rather than refused. */
  let lost = false
  try {
    // Two at a time: libuv's other threads stay free for the visitors' password checks (hashNewPassword).
    await atMost(PASSWORD_HASH_CONCURRENCY, admitted, (item) => hashNewPassword(item.settings, item.link))
    // Outside any transaction, a few at a time: each fetch may take the whole AUTOFILL_TIMEOUT_MS. Once the instance
    // is closing no more pages are fetched (the rest are stored as sent, autofill skipped): a batch of slow pages
    // would otherwise outlast the close's wait for requests under way, and be cut off unanswered.
    if (request.autofill !== false) {
      await atMost(AUTOFILL_CONCURRENCY, admitted, async (item) => {
        if (context.closing?.()) return
        const autofill = await context.autofill.fill(item.settings.url, item.settings)
        Object.assign(item.settings, autofill.filled)
        item.autofill = autofill.status
      })
    }
    // Nothing to store (every link refused by the quota): no place to wait for.
    if (admitted.length > 0) await inPlace(async () => {
      const store = async (item: Prepared) => {
        try {
          sending = 1
          results[item.index] = { status: 201, link: await insertWithSlug(context, caller, item.domain, item.link.id, item.settings, keyOf(item)) }
          created++
          sending = 0
        } catch (error) {
          fail(item.index, error)
          sending = 0
        }
      }
      const plain = admitted.filter((item) => isPlainLink(item.settings))
      let stored: (StoredLink | null)[] | undefined
      try {
        sending = plain.length
        stored = await insertPlainLinks(
          context.database,
          plain.map((item) => ({
            workspaceId: caller.workspaceId, domain: item.domain, slug: item.link.id ?? generateSlug(), settings: item.settings, idempotency: keyOf(item),
          })),
        )
      } catch (error) {
        // A folder deleted meanwhile fails the whole statement: one by one, only its links get the 400.
        if (!folderGone(error)) throw error
      }
      sending = 0
      for (const [position, item] of plain.entries()) {
        const link = stored?.[position]
        if (link) {
          results[item.index] = { status: 201, link }
          created++
        } else if (stored && item.link.id !== undefined) {
          fail(item.index, slugTaken(item.domain, item.link.id))
        } else {
          // A generated slug that was taken (or the batch that failed): stored the way a single create stores it.
          await store(item)
        }
      }
      for (const item of admitted.filter((item) => !isPlainLink(item.settings))) await store(item)
    })
  } catch (error) {
    // The batch fails whole (a 503), but links stored before it failed stay: a retry must not take it for undone,
    // whatever the failure was (a 500 would say nothing of them).
    lost = error instanceof OutcomeUnknownError
    throw !lost && created > 0 && !(error instanceof AppError) ? new OutcomeUnknownError(error) : error
  } finally {
    // Links that may be stored keep their slots: a retry with the key answers them without taking any.
    await reservation.settle(created + (lost ? sending : 0))
  }
  const createdLinks = results.flatMap((result) => (result.status === 201 && 'link' in result ? [result.link] : []))
  if (createdLinks.length > 0) context.onChange?.(createdLinks)
  return results
}
