/**
 * `http_request_duration_seconds`: how long each request took, per method, route pattern and status code (its
 * `_count` is the request count). This is the one metric with a cost per request, and the redirect route
 * answers tens of thousands of requests a second, so it is kept outside prom-client's own Histogram: that
 * one's `observe` allocates, validates and hashes the labels into a string on every call, even on a bound
 * child (about 1 µs a call measured here, some percent of the redirect's whole budget). Here a request adds
 * one to a slot of a typed array its route already holds, found by its status code; the label strings are
 * made once per series. prom-client still writes the exposition: the metric below is a prom-client Histogram
 * (name, help, buckets and label names checked by it) whose values are read from these slots at scrape time.
 */
import { Histogram } from 'prom-client'

type LabelName = 'method' | 'route' | 'status_code'

/**
 * Buckets in seconds: a warm redirect takes well under a millisecond, an API write a few, a stats read tens
 * to hundreds, and the server's request timeout bounds the top.
 */
export const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** One series: a method, a route pattern and a status code. */
class Series {
  /** Observations per bucket (not cumulative); the last slot is above the largest bucket. */
  readonly counts = new Float64Array(DURATION_BUCKETS.length + 1)
  sum = 0
  count = 0

  constructor(readonly labels: Record<LabelName, string>) {}

  observe(seconds: number): void {
    let slot = 0
    while (slot < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[slot]) slot++
    this.counts[slot]++
    this.sum += seconds
    this.count++
  }
}

/** The series of one route and method, by status code (made on first use). */
export class RouteSeries {
  private readonly byStatus = new Map<number, Series>()

  constructor(
    private readonly all: Series[],
    private readonly method: string,
    private readonly route: string,
  ) {}

  observe(statusCode: number, milliseconds: number): void {
    let series = this.byStatus.get(statusCode)
    if (series === undefined) {
      series = new Series({ method: this.method, route: this.route, status_code: String(statusCode) })
      this.byStatus.set(statusCode, series)
      this.all.push(series)
    }
    series.observe(milliseconds / 1000)
  }
}

type Values = Awaited<ReturnType<Histogram<LabelName>['get']>>['values']

const NAME = 'http_request_duration_seconds'
const HELP = "Time from the request's arrival to its answer, by method, route pattern and status code (_count: the requests)"

export class RequestDurations extends Histogram<LabelName> {
  private readonly series: Series[] = []

  constructor() {
    super({
      name: NAME,
      help: HELP,
      labelNames: ['method', 'route', 'status_code'],
      buckets: DURATION_BUCKETS,
      registers: [],
    })
  }

  /** The series a route records into; `route` is the pattern (`/:slug`), never a request's path. */
  route(method: string, route: string): RouteSeries {
    return new RouteSeries(this.series, method, route)
  }

  override async get() {
    const values: Values = []
    for (const { labels, counts, sum, count } of this.series) {
      let cumulative = 0
      DURATION_BUCKETS.forEach((le, slot) => {
        cumulative += counts[slot]
        values.push({ metricName: `${NAME}_bucket`, labels: { ...labels, le } as never, value: cumulative })
      })
      values.push({ metricName: `${NAME}_bucket`, labels: { ...labels, le: '+Inf' } as never, value: count })
      values.push({ metricName: `${NAME}_sum`, labels, value: sum })
      values.push({ metricName: `${NAME}_count`, labels, value: count })
    }
    // The fields prom-client's registry reads (its type is the text of the exposition, 'histogram').
    return { name: NAME, help: HELP, type: 'histogram' as never, aggregator: 'sum' as const, collect: undefined as never, values }
  }

  /** prom-client's registry prefers this to get() when a metric has it; a Histogram's reads its own (empty) values. */
  getForPromString() {
    return this.get()
  }
}
