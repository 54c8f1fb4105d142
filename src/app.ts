import { randomUUID } from 'node:crypto'
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import { pino } from 'pino'
import type { Config } from './config/config.js'
import type { Database } from './db/database.js'
import healthRoutes from './health/health-routes.js'
import folderRoutes from './folders/folder-routes.js'
import linkReadRoutes from './links/link-read-routes.js'
import linkRoutes from './links/link-routes.js'
import type { BulkSlotOptions } from './links/bulk-slots.js'
import pixelRoutes from './pixels/pixel-routes.js'
import qrRoutes from './qr/qr-routes.js'
import { DrawBudget } from './qr/draw-budget.js'
import scriptRoutes from './scripts/script-routes.js'
import auth from './plugins/auth.js'
import database from './plugins/database.js'
import errors, { BODY_LIMIT } from './plugins/errors.js'
import gracefulClose, { type DrainOptions } from './plugins/graceful-close.js'
import httpServer, { httpServerOptions, type HttpTimeouts } from './plugins/http-server.js'
import jsonBody from './plugins/json-body.js'
import metrics from './plugins/metrics.js'
import metricsRoutes from './metrics/metrics-routes.js'
import overload, { refusedReplies, type OverloadOptions } from './plugins/overload.js'
import openapi from './plugins/openapi.js'
import autofill, { type AutofillPluginOptions } from './plugins/autofill.js'
import idempotency, { type IdempotencyOptions } from './plugins/idempotency.js'
import rateLimits, { type RateLimitOptions } from './plugins/rate-limits.js'
import redis from './plugins/redis.js'
import validation from './plugins/validation.js'
import redirects, { type RedirectPluginOptions } from './plugins/redirects.js'
import visits, { type VisitPluginOptions } from './plugins/visits.js'
import redirectRoutes from './redirects/redirect-routes.js'
import { sharedSerializers } from './plugins/serializers.js'
import statsRoutes from './analytics/stats-routes.js'
import type { BadTokenThrottle } from './auth/bad-token-throttle.js'
import type { TokenCacheOptions } from './plugins/auth.js'
import { API_HEADERS } from './plugins/api-headers.js'
import { isApiRequest } from './plugins/request-target.js'

export interface AppOptions {
  config: Config
  database: Database
  /** Close the database when the app closes (the server does; tests that share one database do not). */
  closeDatabase?: boolean
  logger?: FastifyServerOptions['logger']
  throttle?: BadTokenThrottle
  /** The QR codes' drawing budget (tests); see src/qr/draw-budget.ts. */
  qrDrawing?: DrawBudget
  /** The token cache's lifetime and clock (tests); see src/plugins/auth.ts. */
  tokenCache?: TokenCacheOptions
  /** Quota store, clock and Redis key prefix overrides (tests, benchmarks); see src/plugins/rate-limits.ts. */
  rateLimits?: RateLimitOptions
  /** Idempotency-Key store, clock, lifetimes and Redis key prefix overrides (tests); see src/plugins/idempotency.ts. */
  idempotency?: IdempotencyOptions
  /** Resolver, address restriction and cache overrides (tests); see src/plugins/autofill.ts. */
  autofill?: AutofillPluginOptions
  /** Shorter server timeouts and drain (tests); see src/plugins/http-server.ts and graceful-close.ts. */
  httpTimeouts?: Partial<HttpTimeouts>
  drain?: Partial<DrainOptions>
  /** Clock, random source, cache, Redis key prefix and visit recorder overrides (tests, benchmarks); see src/plugins/redirects.ts. */
  redirects?: RedirectPluginOptions
  /** Visit buffer sizes and clock (tests, benchmarks); see src/plugins/visits.ts. */
  visits?: Omit<VisitPluginOptions, 'recorder'>
  /** Faster sampling of the overload checks (tests); see src/plugins/overload.ts. */
  overload?: OverloadOptions
  /** How many bulk creates are worked on at once and may wait (tests); see src/links/bulk-slots.ts. */
  bulk?: BulkSlotOptions
}

/** An API token (src/auth/tokens.ts: `sl_` and 32 more), in any case, where a client may put one by mistake. */
const TOKEN = /sl_[A-Za-z0-9_-]{24,}/i
const TOKENS = new RegExp(TOKEN.source, 'gi')
/** What a URL holding a token holds, any of its letters percent-encoded or not: the cheap test before decoding. */
const MAY_HOLD_TOKEN = /(?:s|%73)(?:l|%6c)(?:_|%5f)/i
/** Decodes the URL's escapes of ASCII characters (a token's are), whatever else in it would not decode. */
const decodeAscii = (url: string) =>
  url.replace(/%([0-7][0-9a-f])/gi, (_escape, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))

/** A request id from the caller (a load balancer's X-Request-Id) when it looks sane (and is no token), else a new one. */
function requestId(request: { headers: Record<string, string | string[] | undefined> }): string {
  const given = request.headers['x-request-id']
  return typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given) && !TOKEN.test(given) ? given : randomUUID()
}

/** The URL as logged: anything shaped like a token masked, found with its ASCII escapes decoded (`s%6c_…` too). */
function loggedUrl(url: string): string {
  if (!MAY_HOLD_TOKEN.test(url)) return url
  const text = decodeAscii(url)
  return TOKEN.test(text) ? text.replace(TOKENS, 'sl_[redacted]') : url
}

/**
 * The request as its log line holds it (Fastify's own fields), with anything shaped like a token in its URL masked:
 * the token is never logged, whichever place a client sent it in (it is only ever read from Api-Authorization).
 */
function loggedRequest(request: FastifyRequest) {
  const url = loggedUrl(request.url)
  return {
    method: request.method,
    url,
    version: request.headers?.['accept-version'] as string | undefined,
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  }
}

function withRequestSerializer(logger: FastifyServerOptions['logger']): FastifyServerOptions['logger'] {
  if (typeof logger !== 'object' || logger === null) return logger
  return { ...logger, serializers: { ...logger.serializers, req: loggedRequest } }
}

/**
 * The service's log: standard output, written asynchronously (pino's sonic-boom, no minimum length, so a line
 * still leaves within a tick or two): a synchronous write per line cost a sixth of the CPU under load. Lines
 * still buffered are written when the app closes and when the process exits (pino registers that).
 */
export function loggerOptions(config: Config): FastifyServerOptions['logger'] {
  return {
    stream: pino.destination({ dest: 1, sync: false }),
    level: config.logLevel,
    // Pino's request serializer logs no headers; this is a second guard should that change.
    redact: { paths: ['req.headers["api-authorization"]', 'req.headers.cookie', '*.password'], censor: '[redacted]' },
  }
}

/**
 * One log line per request, written when it is answered and holding both the request and the answer (as pino-http
 * writes it), instead of Fastify's two: at the default level the second line cost a fifth of a fixed route's time
 * (npm run bench, /healthz). The line at arrival is still there at `debug`, for a request that never ends.
 */
export class OneLinePerRequest extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // Refused for overload: counted, and logged once a minute in all (src/plugins/overload.ts).
    if (refusedReplies.has(reply)) return
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed')
  }
}

/**
 * TRUST_PROXY as Fastify takes it. A hop count becomes proxy-addr's function for it (the `n` addresses nearest
 * to the service are proxies): Fastify 5 now reads a bare number as "trust no hop", which silently made every
 * visitor the load balancer.
 */
function fastifyTrustProxy(trust: Config['trustProxy']): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust !== 'number') return trust
  return (_address, hop) => hop < trust
}

/** Builds the whole service: infrastructure plugins first, then the routes. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { config } = options
  const app = Fastify({
    // The request serializer whatever the logger's options (tests give their own stream); not false (no log).
    logger: withRequestSerializer(options.logger ?? loggerOptions(config)),
    logController: new OneLinePerRequest(),
    bodyLimit: BODY_LIMIT,
    trustProxy: fastifyTrustProxy(config.trustProxy),
    genReqId: requestId,
    ...httpServerOptions(options.httpTimeouts),
    // Requests that arrive while the app closes get graceful-close's 503, which is problem+json.
    return503OnClosing: false,
    schemaController: { compilersFactory: { buildSerializer: sharedSerializers } },
  })
  const logStream = (options.logger as { stream?: { flushSync?: () => void } } | undefined)?.stream
  if (typeof logStream?.flushSync === 'function') {
    app.addHook('onClose', (_instance, done) => {
      try {
        logStream.flushSync!()
      } catch {
        // Nothing buffered, or standard output is gone: nothing more can be written anyway.
      }
      done()
    })
  }
  // A callback hook, not an async one: it runs on every request, visits included, and a promise costs more.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    if (isApiRequest(request.url)) reply.headers(API_HEADERS)
    done()
  })

  await app.register(errors)
  // Before every route, so that its onRoute hook times them all.
  await app.register(metrics)
  await app.register(httpServer)
  await app.register(gracefulClose, { ...options.drain, interrupt: () => options.database.interrupt() })
  await app.register(jsonBody)
  await app.register(validation)
  await app.register(database, { database: options.database, closeWithApp: options.closeDatabase ?? false })
  await app.register(overload, { config, overload: options.overload })
  await app.register(redis, { config })
  await app.register(auth, { config, throttle: options.throttle, cache: options.tokenCache })
  await app.register(rateLimits, { config, rateLimits: options.rateLimits })
  await app.register(idempotency, { config, idempotency: options.idempotency })
  await app.register(autofill, { config, autofill: options.autofill })
  await app.register(visits, { config, recorder: options.redirects?.visits, ...options.visits })
  await app.register(redirects, { config, redirects: options.redirects })
  await app.register(openapi, { config })

  await app.register(healthRoutes)
  await app.register(metricsRoutes, { metricsToken: config.metricsToken })
  // Visitors see a change to a link at once, on every instance.
  const links = {
    prisma: options.database.prisma,
    database: options.database,
    config,
    autofill: app.autofill,
    onChange: app.redirects.linksChanged,
    onUncertain: app.redirects.linksUncertain,
    closing: () => app.closingSince !== null,
  }
  await app.register(linkRoutes, { links, bulk: options.bulk })
  await app.register(linkReadRoutes, { links })
  app.decorate('qrDrawing', options.qrDrawing ?? new DrawBudget())
  await app.register(qrRoutes, { links })
  await app.register(folderRoutes, { prisma: options.database.prisma })
  // Visitors see a change to a pixel or script at once too (every link of the workspace is forgotten).
  const changes = { changed: app.redirects.workspaceChanged, uncertain: app.redirects.workspaceUncertain }
  await app.register(pixelRoutes, { prisma: options.database.prisma, changes })
  await app.register(scriptRoutes, { prisma: options.database.prisma, changes })
  await app.register(statsRoutes, { links })
  await app.register(redirectRoutes, { countryHeader: config.countryHeader })
  return app
}
