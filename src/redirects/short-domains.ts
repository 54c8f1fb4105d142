/**
 * Which hosts are short domains: DEFAULT_DOMAIN, RESERVED_DOMAINS and every workspace's domain. The
 * workspaces' domains are read whole into memory at start and again every DOMAINS_REFRESH_MS, on a timer, so a
 * visit never waits for them and a domain added by the command line (another process) is served within about
 * that long, however long since the last visit. (Read when a visit came instead, the first visit after a quiet
 * spell was answered from the old list.)
 */
import type { FastifyBaseLogger } from 'fastify'
import type { PrismaClient } from '../db/database.js'

export const DOMAINS_REFRESH_MS = 5000

export class ShortDomains {
  private hosts = new Set<string>()
  private refreshing: Promise<void> | null = null
  private timer: NodeJS.Timeout | null = null

  constructor(
    private readonly prisma: PrismaClient,
    private readonly fixed: string[],
    private readonly log: FastifyBaseLogger,
    private readonly refreshMs = DOMAINS_REFRESH_MS,
  ) {
    this.hosts = new Set(fixed)
  }

  /** `host`: lower case, without port or final dot. */
  has(host: string): boolean {
    return this.hosts.has(host)
  }

  /** Reads the domains now, and again every refreshMs until stop(). */
  start(): Promise<void> {
    this.timer ??= setInterval(() => void this.refresh(), this.refreshMs).unref()
    return this.refresh()
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }

  /** The short domain a request's host name (Fastify's `request.hostname`) names, or null when it names none. */
  hostOf(hostname: string): string | null {
    const host = requestHost(hostname)
    return this.has(host) ? host : null
  }

  /** Reads the domains now (once at a time); a failure keeps the previous set and is tried again later. */
  refresh(): Promise<void> {
    this.refreshing ??= this.read().finally(() => {
      this.refreshing = null
    })
    return this.refreshing
  }

  private async read(): Promise<void> {
    try {
      const rows = await this.prisma.domain.findMany({ select: { host: true } })
      this.hosts = new Set([...this.fixed, ...rows.map((row) => row.host)])
    } catch (error) {
      this.log.warn({ err: error }, 'redirects: could not read the short domains; keeping the ones known')
    }
  }
}

/** The request's host as a short domain would be written: lower case, no port, no final dot. */
export function requestHost(hostname: string): string {
  const host = hostname.toLowerCase()
  return host.endsWith('.') ? host.slice(0, -1) : host
}
