/**
 * `app.metrics`: Prometheus metrics (served at GET /metrics by src/metrics/metrics-routes.ts), through prom-client (the Node client the Prometheus project lists; its
 * registry writes the text format). fastify-metrics was not used: it times every request with prom-client's
 * own histogram and a timer object per request, the costliest way for a route answering tens of thousands of
 * visits a second, and its route label reads `request.routeOptions`, which builds an object per call.
 *
 * - Per request: one onResponse hook per route, added as the route is declared (onRoute), that knows its
 *   method and route pattern already; it reads `reply.elapsedTime` and adds it to its status code's series
 *   (src/metrics/request-durations.ts). Requests no route matches are counted under the route `unmatched` (a GET
 *   always matches a visitor route: /:slug or /*).
 * - Everything else is read at scrape time from the counters the service keeps (src/metrics/service-metrics.ts).
 * - Process metrics: prom-client's defaults (CPU, memory, heap, event-loop lag, GC, handles), one set per
 *   process, shared by the apps a test process builds.
 *
 * Registered before the routes, so that its onRoute hook sees them all; /metrics itself is left out.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { collectDefaultMetrics, Registry } from 'prom-client'
import { RequestDurations, type RouteSeries } from '../metrics/request-durations.js'

export const METRICS_PATH = '/metrics'

export interface Metrics {
  /** This app's metrics (src/metrics/metrics-routes.ts registers the service's on it). */
  registry: Registry
  /** The text exposition of the app's and the process's metrics. */
  scrape(): Promise<string>
  readonly contentType: string
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics
  }
}

let processRegistry: Registry | undefined
/** prom-client's default metrics, registered once per process (each registration adds a GC observer). */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry()
    collectDefaultMetrics({ register: processRegistry })
  }
  return processRegistry
}

type OnResponse = (request: FastifyRequest, reply: FastifyReply, done: () => void) => void

/** The hook of one route and method: the label values are bound once, here. */
function recorderOf(series: RouteSeries): OnResponse {
  return (_request, reply, done) => {
    series.observe(reply.statusCode, reply.elapsedTime)
    done()
  }
}

export default fp(
  async function metrics(app: FastifyInstance) {
    // Now rather than at the first scrape: the CPU counters count from their registration.
    processMetrics()
    const registry = new Registry()
    const durations = new RequestDurations()
    registry.registerMetric(durations)
    // Scrapes under way at once share one rendering (8 to 25 ms with the service's counters): a flood of them, which
    // any client could send without METRICS_TOKEN, rendered once each and held up the redirects for up to a second.
    let rendering: Promise<string> | null = null
    app.decorate('metrics', {
      registry,
      // The process metrics sit beside the app's, merged per scrape (a handful of objects).
      scrape: () =>
        (rendering ??= Registry.merge([processMetrics(), registry])
          .metrics()
          .finally(() => {
            rendering = null
          })),
      contentType: registry.contentType,
    })

    app.addHook('onRoute', (route: RouteOptions) => {
      if (route.url === METRICS_PATH) return
      // A route declared for several methods gets a hook that picks the series by the request's method.
      const methods = [route.method].flat()
      const byMethod = new Map(methods.map((method) => [method, durations.route(method, route.url)]))
      const hook: OnResponse =
        byMethod.size === 1
          ? recorderOf(byMethod.values().next().value!)
          : (request, reply, done) => {
              byMethod.get(request.method)?.observe(reply.statusCode, reply.elapsedTime)
              done()
            }
      route.onResponse = [route.onResponse ?? []].flat().concat(hook as never)
    })
    // Requests no route matched (the not-found handler's) have no route hook. is404 reads one property.
    const unmatched = new Map<string, RouteSeries>()
    app.addHook('onResponse', (request, reply, done) => {
      if (request.is404) {
        let series = unmatched.get(request.method)
        if (!series) unmatched.set(request.method, (series = durations.route(request.method, 'unmatched')))
        series.observe(reply.statusCode, reply.elapsedTime)
      }
      done()
    })
  },
  { name: 'metrics' },
)
