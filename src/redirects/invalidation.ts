/**
 * How every instance hears of a change to a link (contract: seen by visitors within a second): through Redis
 * pub/sub when REDIS_URL is set, and at once in the process that made the change either way.
 *
 * A subscriber that is not connected cannot hear changes, so while it is down the caches trust nothing older
 * than BLIND_MAX_AGE_MS; when it (re)subscribes it clears them, since messages may have been missed meanwhile.
 * A publish that fails (this instance cannot reach Redis, while others may still hear it) is made good once this
 * instance reaches Redis again: it tells every instance to forget every link. Until then, and for an instance that
 * never does, the cache's lifetime (LINK_TTL_MS) bounds it.
 */
import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { withDeadline } from '../redis/redis-client.js'
import { OccasionalWarning } from '../logging/occasional-warning.js'

/** What changed: some links (cache keys), or anything of a workspace that its links show (pixels, scripts). */
export interface Change {
  keys?: string[]
  /** Links by uniq (a failed write's, whose address the request did not name). */
  links?: number[]
  workspaceId?: number
  /** Changes of this instance went unsent: forget every link. */
  everything?: true
}

/** While changes may go unheard, a cached link is used for at most this long after it was read. */
export const BLIND_MAX_AGE_MS = 1000
/**
 * The subscriber is asked for a PONG this often, and counts as deaf once nothing came back for DEAF_AFTER_MS: a
 * connection that goes silent without closing (a frozen Redis, a path that drops packets) stops the caches'
 * trust within that, so a change made meanwhile is seen within about a second still. Messages that arrive late
 * on the same connection arrive in order, before the late PONG; a connection that dies is replaced and resyncs.
 */
const HEARTBEAT_MS = 250
const DEAF_AFTER_MS = 750
/** A connection silent this long is closed and a new one made (ioredis's socket timeout). */
const SOCKET_TIMEOUT_MS = 2000

export interface ChangeChannel {
  /** True while changes made by other instances are known to arrive. */
  readonly live: boolean
  publish(change: Change): void
  close(): Promise<void>
}

export interface ChangeHandlers {
  apply(change: Change): void
  /** Changes may have been missed: forget everything. */
  resync(): void
}

/** One process: nothing to tell anyone else. */
export const localChannel: ChangeChannel = { live: true, publish() {}, close: async () => {} }

export class RedisChangeChannel implements ChangeChannel {
  private readonly instance = randomUUID()
  private readonly subscriber: Redis
  private readonly heartbeat: NodeJS.Timeout
  private subscribed = false
  /** When the subscriber last answered a PING or brought a message. */
  private lastHeard = 0
  private readonly publishWarning = new OccasionalWarning()
  /** A publish failed: the others may have missed a change, until everything is sent. */
  private unsent = false
  private readonly reconnected = () => this.sendEverythingIfUnsent()

  constructor(
    private readonly redis: Redis,
    private readonly channel: string,
    private readonly handlers: ChangeHandlers,
    private readonly log: FastifyBaseLogger,
  ) {
    // A connection of its own: a subscribed connection can do nothing else.
    this.subscriber = redis.duplicate({ autoResubscribe: false, socketTimeout: SOCKET_TIMEOUT_MS })
    this.subscriber.on('error', () => {})
    this.subscriber.on('ready', () => void this.subscribe())
    this.subscriber.on('close', () => {
      this.subscribed = false
    })
    this.subscriber.on('message', (_channel: string, text: string) => {
      this.lastHeard = Date.now()
      this.receive(text)
    })
    // Back in touch with Redis: what failed to go out meanwhile is made good.
    redis.on('ready', this.reconnected)
    this.heartbeat = setInterval(() => {
      if (this.subscribed) this.subscriber.ping().then(() => (this.lastHeard = Date.now()), () => {})
    }, HEARTBEAT_MS).unref()
  }

  get live(): boolean {
    return this.subscribed && Date.now() - this.lastHeard <= DEAF_AFTER_MS
  }

  private async subscribe(): Promise<void> {
    try {
      await this.subscriber.subscribe(this.channel)
      this.handlers.resync()
      this.lastHeard = Date.now()
      this.subscribed = true
    } catch {
      // The connection failed again; the next 'ready' tries once more.
    }
  }

  private receive(text: string): void {
    let message: Change & { from?: string }
    try {
      message = JSON.parse(text)
    } catch {
      return
    }
    if (message.from === this.instance) return
    if (message.everything) this.handlers.resync()
    else this.handlers.apply(message)
  }

  private sendEverythingIfUnsent(): void {
    if (!this.unsent) return
    this.unsent = false
    this.publish({ everything: true })
  }

  /**
   * The links changed in this turn of the event loop, sent together once it ends: under load many writes finish
   * in one turn, and each message costs a write here and a read on every instance (this one too). A few
   * microseconds later, well within the second the contract allows.
   */
  private pendingKeys: string[] = []

  publish(change: Change): void {
    // Links named by uniq (a failed write's, rare) go at once, as they are: the batch carries keys only.
    if (change.workspaceId !== undefined || change.everything || !change.keys || change.links?.length) return this.send(change)
    if (this.pendingKeys.push(...change.keys) === change.keys.length) setImmediate(() => this.sendPendingKeys())
  }

  private sendPendingKeys(): void {
    const keys = this.pendingKeys
    this.pendingKeys = []
    if (keys.length > 0) this.send({ keys })
  }

  private send(change: Change): void {
    withDeadline(this.redis.publish(this.channel, JSON.stringify({ ...change, from: this.instance }))).then(() => this.sendEverythingIfUnsent(), (error: Error) => {
      this.unsent = true
      if (this.publishWarning.occurred() === null) return
      this.log.warn(
        { err: error },
        'redirects: could not tell the other instances of a link change through Redis; they see it once this instance reaches Redis again, within 60 s at most',
      )
    })
  }

  async close(): Promise<void> {
    this.sendPendingKeys()
    clearInterval(this.heartbeat)
    this.redis.off('ready', this.reconnected)
    this.subscribed = false
    await this.subscriber.quit().catch(() => {})
    this.subscriber.disconnect()
  }
}
