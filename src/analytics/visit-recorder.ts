/**
 * Records visits off the visitor's path: `record` only appends to an in-process buffer (it is called after the
 * answer is sent), and the buffer is written in batches (src/analytics/visit-store.ts) every second, or sooner
 * once a batch is full. Everything that costs (parsing the User-Agent, hashing the visitor, the database) happens
 * in the batch.
 *
 * The buffer is bounded: when the database is slow or down, visits beyond the bound are dropped and counted,
 * never making a visitor wait. A batch that fails is kept and tried again at the next tick (within the same
 * bound), as the same batch under the same id: one whose COMMIT went through unbeknown to us is then not stored
 * twice (visit-store.ts). Closing (SIGTERM) writes what is buffered. A crash loses what was buffered since the
 * last write: at most a second of visits, or the whole buffer while the database is down.
 */
import type { FastifyBaseLogger } from 'fastify'
import { randomUUID } from 'node:crypto'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Visit, VisitRecorder } from '../redirects/visits.js'
import { MAX_PARSED_LENGTH, userAgentFacts, type UserAgentFacts } from './user-agent.js'
import type { VisitRow } from './visit-store.js'
import { visitorHash, type VisitorKeys } from './visitor-key.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

const DAY_MS = 86_400_000
/** User-Agent headers shared between buffered visits (see record): how many, and up to what length. */
const MAX_SHARED_USER_AGENTS = 5000
const MAX_SHARED_USER_AGENT = 512

/** A pause that does not keep the process alive (closing must not outlast its writes). */
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)).unref())

export interface VisitBufferOptions {
  /** Most visits held while waiting to be written (default 100,000: some 50 MB with a browser's usual headers). */
  maxBuffered?: number
  /**
   * Most bytes of visits held, by visitBytes (default 64 MiB): a visit holds its client's User-Agent and referrer,
   * which may be kilobytes each, so the number of visits alone would bound nothing.
   */
  maxBufferedBytes?: number
  /** How often the buffer is written (default 1 s). */
  flushEveryMs?: number
  /**
   * Most visits per batch (default 20,000); a full batch is written at once. A batch should hold a whole second of
   * visits: its aggregate rows grow with the links visited, so smaller batches write the same rows many times.
   */
  batchSize?: number
}

export interface VisitRecorderStats {
  /** Visits accepted into the buffer. */
  recorded: number
  /** Visits written to the database. */
  stored: number
  /** Visits refused because the buffer was full. */
  dropped: number
  /** Batches the database refused (tried again). */
  failedBatches: number
  /** Visits in the buffer now. */
  buffered: number
}

/** Referrers longer than this are held as their origin only (only the host is stored). */
const MAX_HELD_REFERRER = 512

/** A referrer's scheme and host (`https://host:port`, `android-app://com.example`), or none if it has no host. */
function originOf(referrer: string): string | undefined {
  try {
    const url = new URL(referrer)
    return url.host ? `${url.protocol}//${url.host}` : undefined
  } catch {
    return undefined
  }
}

/** A string of its own: V8's slice of a long string keeps the whole of it alive. */
const copyOf = (text: string) => Buffer.from(text, 'utf16le').toString('utf16le')

/** What a buffered visit weighs, roughly: the object and its strings, the client's headers at a byte a character. */
const visitBytes = (visit: Visit) => 400 + (visit.userAgent?.length ?? 0) + (visit.referrer?.length ?? 0)

/** The referrer's host, lower case; none for a direct visit or a referrer that is not a URL. */
export function referrerHost(referrer: string | undefined): string | null {
  if (!referrer) return null
  try {
    return new URL(referrer).hostname.toLowerCase() || null
  } catch {
    return null
  }
}

export class BufferedVisitRecorder implements VisitRecorder {
  private buffer: Visit[] = []
  /** The batch being written, taken off the buffer: until it is stored it is tried again as it is. */
  private batch: { id: string; visits: Visit[] } | null = null
  private readonly userAgents = new Map<string, string>()
  private writing: Promise<void> | null = null
  private timer: NodeJS.Timeout | null = null
  private failing = false
  private readonly dropWarning = new OccasionalWarning()
  private readonly maxBuffered: number
  private readonly maxBufferedBytes: number
  /** The bytes of the visits held (buffer and batch), by visitBytes. */
  private heldBytes = 0
  private readonly flushEveryMs: number
  private readonly batchSize: number
  readonly counts = { recorded: 0, stored: 0, dropped: 0, failedBatches: 0 }

  constructor(
    private readonly store: (rows: VisitRow[], batchId: string) => Promise<void>,
    private readonly keys: VisitorKeys,
    private readonly log: FastifyBaseLogger,
    options: VisitBufferOptions = {},
  ) {
    this.maxBuffered = options.maxBuffered ?? 100_000
    this.maxBufferedBytes = options.maxBufferedBytes ?? 64 * 1024 * 1024
    this.flushEveryMs = options.flushEveryMs ?? 1000
    this.batchSize = options.batchSize ?? 20_000
  }

  /** Visits recorded and not stored yet: the buffer and the batch being written. */
  private get held(): number {
    return this.buffer.length + (this.batch?.visits.length ?? 0)
  }

  record(visit: Visit): void {
    // Only the referrer's host is stored and the User-Agent read from its start: longer headers are cut now.
    if (visit.referrer !== undefined && visit.referrer.length > MAX_HELD_REFERRER) visit.referrer = originOf(visit.referrer)
    if (visit.userAgent !== undefined && visit.userAgent.length > MAX_PARSED_LENGTH) visit.userAgent = copyOf(visit.userAgent.slice(0, MAX_PARSED_LENGTH))
    const bytes = visitBytes(visit)
    if (this.held >= this.maxBuffered || this.heldBytes + bytes > this.maxBufferedBytes) {
      this.counts.dropped++
      const dropped = this.dropWarning.occurred()
      if (dropped !== null) {
        this.log.warn({ dropped, buffered: this.held }, 'visits: the buffer is full (the database takes no batch); visits are dropped, counted, and not stored')
      }
      return
    }
    // A buffered visit lives about a second: long enough for the garbage collector to move it to the old
    // generation, which then grows by what visits hold. The User-Agent is the longest of it and repeats
    // heavily, so the buffer holds the first copy of each header rather than every request's own.
    const userAgent = visit.userAgent
    if (userAgent !== undefined && userAgent.length <= MAX_SHARED_USER_AGENT) {
      const shared = this.userAgents.get(userAgent)
      if (shared !== undefined) visit.userAgent = shared
      else {
        if (this.userAgents.size >= MAX_SHARED_USER_AGENTS) this.userAgents.clear()
        this.userAgents.set(userAgent, userAgent)
      }
    }
    this.buffer.push(visit)
    this.heldBytes += bytes
    this.counts.recorded++
    if (this.buffer.length >= this.batchSize && !this.writing) void this.flush()
  }

  stats(): VisitRecorderStats {
    return { ...this.counts, buffered: this.held }
  }

  /** Starts the periodic writes. */
  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.flushEveryMs)
    this.timer.unref()
  }

  /** Writes what is buffered, a batch at a time; one write runs at a time (a call during one waits for it). */
  flush(): Promise<void> {
    this.writing ??= this.writeAll().finally(() => {
      this.writing = null
    })
    return this.writing
  }

  /**
   * Stops the timer and writes what is buffered, giving up after `deadlineMs`, or after `whileFailingMs` once a
   * write has failed (the database is down: a write that waits, for a lock say, has the whole time). A write
   * under way at the deadline is left behind, not waited for: it may still commit.
   */
  async close(deadlineMs = 5000, whileFailingMs = deadlineMs): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    const started = Date.now()
    const until = () => started + (this.failing ? Math.min(deadlineMs, whileFailingMs) : deadlineMs)
    const buffered = this.held
    while (this.held > 0 && Date.now() < until()) {
      await Promise.race([this.flush(), pause(until() - Date.now())])
      if (this.failing && Date.now() < until()) await pause(Math.min(100, until() - Date.now()))
    }
    if (this.held > 0) {
      this.log.error({ lost: this.held }, 'visits: closing before the database took the buffered visits (lost, unless a write still under way commits)')
    } else this.log.info({ written: buffered, ...this.counts }, 'visits: the buffered visits are written')
  }

  private async writeAll(): Promise<void> {
    while (this.batch || this.buffer.length > 0) {
      this.batch ??= { id: randomUUID(), visits: this.buffer.splice(0, this.batchSize) }
      try {
        await this.store(await this.resolve(this.batch.visits), this.batch.id)
      } catch (error) {
        this.counts.failedBatches++
        if (!this.failing) this.log.warn({ err: error, buffered: this.held }, 'visits: writing a batch failed; it is kept and tried again')
        this.failing = true
        return
      }
      this.counts.stored += this.batch.visits.length
      for (const stored of this.batch.visits) this.heldBytes -= visitBytes(stored)
      this.batch = null
      if (this.failing) this.log.info('visits: batches are written again')
      this.failing = false
    }
  }

  /**
   * The rows to store. Per batch, each User-Agent is looked up once for its facts and then keeps the hashes of
   * its visitors (one HMAC per day and address): the header is the long part of who a visitor is.
   */
  private async resolve(visits: Visit[]): Promise<VisitRow[]> {
    const rows: VisitRow[] = new Array(visits.length)
    const agents = new Map<string, { facts: UserAgentFacts; visitors: Map<string, string> }>()
    for (const [i, visit] of visits.entries()) {
      if (i > 0 && i % 500 === 0) await nextTurn()
      const userAgent = visit.userAgent ?? ''
      let agent = agents.get(userAgent)
      if (!agent) agents.set(userAgent, (agent = { facts: userAgentFacts(visit.userAgent), visitors: new Map() }))
      const day = Math.floor(visit.at / DAY_MS)
      const who = `${day} ${visit.address}`
      let visitor = agent.visitors.get(who)
      if (visitor === undefined) {
        const key = await this.keys.keyOf(new Date(day * DAY_MS).toISOString().slice(0, 10))
        agent.visitors.set(who, (visitor = visitorHash(key, visit.address, visit.userAgent)))
      }
      const { facts } = agent
      rows[i] = {
        at: visit.at,
        linkUniq: visit.link,
        workspaceId: visit.workspaceId,
        domain: visit.domain,
        country: visit.country,
        referrerHost: referrerHost(visit.referrer),
        device: facts.device,
        os: facts.os,
        browser: facts.browser,
        destination: visit.destination,
        reason: visit.reason,
        answer: visit.answer,
        bot: facts.bot || visit.answer === 'crawler',
        visitor,
        firstOfDay: false,
        firstOfWorkspaceDay: false,
      }
    }
    return rows
  }
}
