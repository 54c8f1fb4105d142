/**
 * A real HTTP server on 127.0.0.1 (a free port) serving the pages autofill fetches in tests. Routes are
 * matched on the path alone (the query is ignored); every request is recorded (path with query, headers)
 * so tests can assert what was fetched, how often and with which User-Agent. Unknown paths answer 404.
 * Closed (every connection included, hanging ones too) when the test ends.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

export type Handler = (request: IncomingMessage, response: ServerResponse) => void | Promise<void>

export interface RecordedRequest {
  /** The path with its query, as the client sent it. */
  url: string
  path: string
  headers: IncomingHttpHeaders
}

export interface PageServer {
  /** `http://127.0.0.1:<port>` */
  origin: string
  /** The absolute address of `path` on this server. */
  url(path: string): string
  /** Serves `path` (without query) with `handler`. */
  route(path: string, handler: Handler): void
  /** The requests received for `path` (without query), or all of them. */
  requests(path?: string): RecordedRequest[]
}

export async function startPageServer(t: { teardown(fn: () => unknown): void }): Promise<PageServer> {
  const routes = new Map<string, Handler>()
  const received: RecordedRequest[] = []
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://page.server').pathname
    received.push({ url: request.url ?? '', path, headers: request.headers })
    const handler = routes.get(path) ?? status(404, 'no such page')
    Promise.resolve(handler(request, response)).catch((error: unknown) => {
      response.destroy(error instanceof Error ? error : new Error(String(error)))
    })
  })
  server.listen(0, '127.0.0.1')
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject))
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    origin,
    url: (path) => origin + path,
    route: (path, handler) => void routes.set(path, handler),
    requests: (path) => (path === undefined ? [...received] : received.filter((request) => request.path === path)),
  }
}

/** An HTML page (a string is sent as UTF-8); `contentType` is sent as given. */
export function page(body: string | Uint8Array, contentType = 'text/html; charset=utf-8'): Handler {
  return respond(200, { 'content-type': contentType }, body)
}

export function status(code: number, body: string | Uint8Array = '', contentType = 'text/html; charset=utf-8'): Handler {
  return respond(code, { 'content-type': contentType }, body)
}

/**
 * `handler`, held until the returned `release()` is called (at the test's end at the latest): a page that answers
 * when the test says so.
 */
export function answerWhenReleased(t: { teardown(fn: () => unknown): void }, handler: Handler): { handler: Handler; release: () => void } {
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  t.teardown(() => release())
  return {
    handler: async (request, response) => {
      await released
      await handler(request, response)
    },
    release,
  }
}

export function redirect(location: string, code = 302): Handler {
  return respond(code, { location }, '')
}

function respond(code: number, headers: OutgoingHttpHeaders, body: string | Uint8Array): Handler {
  return (_request, response) => {
    response.writeHead(code, headers)
    response.end(body)
  }
}

/** Answers with `handler` after `ms`. */
export function delayed(ms: number, handler: Handler): Handler {
  return async (request, response) => {
    await sleep(ms)
    await handler(request, response)
  }
}

/** Sends the headers and the start of a page, then nothing: the response never ends. */
export function hanging(start = '<!doctype html><html><head>'): Handler {
  return (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
    response.write(start)
  }
}

/** What a streamed page managed to send. */
export interface StreamStats {
  /** Bytes handed to the socket before it closed (or all of them). */
  written: number
  total: number
  /** The client closed the connection before the whole body was written. */
  closedEarly: boolean
  /** Settles once the response finished or its connection closed. */
  settled: Promise<void>
}

/**
 * A page of `total` bytes: `start`, then filler in 64 KiB chunks, written one at a time with back-pressure,
 * so a client that stops reading stops the server long before the end.
 */
export function streamedPage(start: string, total: number, fillWith = '<p>filler text</p>\n'): { handler: Handler; stats: StreamStats } {
  let settle!: () => void
  const stats: StreamStats = { written: 0, total, closedEarly: false, settled: new Promise((resolve) => (settle = resolve)) }
  const filler = Buffer.alloc(64 * 1024, fillWith)
  const handler: Handler = async (_request, response) => {
    let closed = false
    response.once('close', () => {
      closed = true
      stats.closedEarly = !response.writableFinished
      settle()
    })
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': String(total) })
    const head = Buffer.from(start)
    response.write(head)
    stats.written = head.length
    while (!closed && stats.written < total) {
      const chunk = filler.subarray(0, Math.min(filler.length, total - stats.written))
      const flushed = response.write(chunk)
      stats.written += chunk.length
      // Wait for the socket to take more (or to close); yield to the event loop either way.
      await (flushed ? new Promise((resolve) => setImmediate(resolve)) : drainOrClose(response))
    }
    if (!closed) response.end()
  }
  return { handler, stats }
}

function drainOrClose(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done)
      response.off('close', done)
      resolve()
    }
    response.on('drain', done)
    response.on('close', done)
  })
}
