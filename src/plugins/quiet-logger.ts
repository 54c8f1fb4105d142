/**
 * The request logger of the visitor routes and the probes. Fastify gives every request a child logger bound to
 * its request id, which pino builds at a cost that shows on a 302 or a probe answered in tens of microseconds;
 * they log nothing below `warn`, so the child is made only when something is logged at `warn` or above (an
 * error), with the same bindings. Installed with setChildLoggerFactory in those routes' scopes only. A stricter
 * LOG_LEVEL (`error`, `fatal`, `silent`) still rules.
 */
import type { FastifyBaseLogger } from 'fastify'

const noop = () => {}

/** pino's numbers for the levels a visit may log at. */
const LEVELS: Record<string, number> = { warn: 40, error: 50, fatal: 60 }
const WARN = LEVELS.warn


class QuietRequestLogger {
  private real: FastifyBaseLogger | null = null
  /** `warn`, or the parent's level when that is stricter. */
  readonly level: string
  private readonly threshold: number
  readonly info = noop
  readonly debug = noop
  readonly trace = noop
  readonly silent = noop

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Record<string, unknown>,
    private readonly options: object,
  ) {
    const parentLevel = (parent as { levelVal?: number }).levelVal ?? 0
    this.threshold = Math.max(WARN, parentLevel)
    this.level = parentLevel > WARN ? parent.level : 'warn'
  }

  private logger(): FastifyBaseLogger {
    this.real ??= this.parent.child(this.bindings, { ...this.options, level: this.level })
    return this.real
  }

  warn(...args: unknown[]): void {
    ;(this.logger().warn as (...args: unknown[]) => void)(...args)
  }

  error(...args: unknown[]): void {
    ;(this.logger().error as (...args: unknown[]) => void)(...args)
  }

  fatal(...args: unknown[]): void {
    ;(this.logger().fatal as (...args: unknown[]) => void)(...args)
  }

  child(bindings: Record<string, unknown>, options?: object): FastifyBaseLogger {
    return this.logger().child(bindings, options)
  }

  isLevelEnabled(level: string): boolean {
    const value = LEVELS[level]
    return value !== undefined && value >= this.threshold
  }
}

export function quietChildLogger(logger: FastifyBaseLogger, bindings: Record<string, unknown>, options: object): FastifyBaseLogger {
  return new QuietRequestLogger(logger, bindings, options) as unknown as FastifyBaseLogger
}
