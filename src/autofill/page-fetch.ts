/**
 * Fetches a page for its metadata, within bounds (contract section 12): one time budget for the whole
 * fetch, redirects included; at most `maxBytes` read, streamed (reading stops there, nothing more is
 * buffered); at most 5 redirects, followed here so that each hop goes through the guarded dispatcher;
 * HTML only. Reading also stops where the head ends (head-scan.ts): everything autofill uses is in the head, so
 * a long page costs no more than its head.
 */
import { fetch, type Dispatcher } from 'undici'
import { decodeHtml } from './charset.js'
import { HeadEnd } from './head-scan.js'

export const MAX_REDIRECTS = 5

export interface PageFetchOptions {
  dispatcher: Dispatcher
  timeoutMs: number
  maxBytes: number
  userAgent: string
  /** Ends every fetch under way, whatever is left of its timeout (the service is closing). */
  stop?: AbortSignal
}

export interface FetchedPage {
  /** The address the page was served from, after redirects: relative addresses resolve against it. */
  url: URL
  html: string
}

/** Why a page could not be used; the message goes to the log. */
export class PageFetchError extends Error {
  override name = 'PageFetchError'
}

/** The cause of a fetch ended by `stop`: not the page's failure, so not cached as one. */
export const STOPPED = Symbol('stopped')

const HTML_TYPES = new Set(['text/html', 'application/xhtml+xml'])

export async function fetchPage(address: string, options: PageFetchOptions): Promise<FetchedPage> {
  const timeout = AbortSignal.timeout(options.timeoutMs)
  const signal = options.stop ? AbortSignal.any([timeout, options.stop]) : timeout
  try {
    let url = new URL(address)
    for (let redirects = 0; ; redirects++) {
      const response = await fetch(url, {
        dispatcher: options.dispatcher,
        redirect: 'manual',
        signal,
        headers: {
          'user-agent': options.userAgent,
          accept: 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.1',
        },
      })
      const location = response.headers.get('location')
      if (response.status >= 300 && response.status < 400 && location) {
        await response.body?.cancel()
        if (redirects >= MAX_REDIRECTS) throw new PageFetchError(`more than ${MAX_REDIRECTS} redirects`)
        url = new URL(location, url)
        if (url.protocol !== 'http:' && url.protocol !== 'https:') {
          throw new PageFetchError(`redirect to a ${url.protocol} address`)
        }
        continue
      }
      if (response.status < 200 || response.status >= 300) {
        await response.body?.cancel()
        throw new PageFetchError(`the page answered ${response.status}`)
      }
      const contentType = response.headers.get('content-type') ?? ''
      const mediaType = contentType.split(';')[0].trim().toLowerCase()
      if (!HTML_TYPES.has(mediaType)) {
        await response.body?.cancel()
        throw new PageFetchError(`not an HTML page (${mediaType || 'no Content-Type'})`)
      }
      const bytes = await readHead(response.body, options.maxBytes)
      return { url, html: decodeHtml(bytes, contentType) }
    }
  } catch (error) {
    if (error instanceof PageFetchError) throw error
    if (options.stop?.aborted) throw new PageFetchError('the service is closing', { cause: STOPPED })
    if (signal.aborted) throw new PageFetchError(`no complete answer within ${options.timeoutMs} ms`)
    throw new PageFetchError(describeNetworkError(error))
  }
}

/**
 * Reads until the head has ended (`</head>`, or the body begun without it) or the stream ends; more than
 * `maxBytes` without either is a page too large to use. The rest of the body is never read: the stream is cancelled.
 */
async function readHead(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<Uint8Array> {
  if (!body) return new Uint8Array()
  const reader = body.getReader()
  const chunks: Uint8Array[] = []
  let length = 0
  const head = new HeadEnd()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      const room = maxBytes - length
      const chunk = value.length > room ? value.subarray(0, room) : value
      chunks.push(chunk)
      length += chunk.length
      // latin1 maps each byte to one character, so the offset found is a byte offset, whatever the page's charset.
      const end = head.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length).toString('latin1'))
      if (end >= 0) return concat(chunks, Math.min(end, length))
      if (value.length > room) throw new PageFetchError(`the page's head is larger than ${maxBytes} bytes`)
    }
    return concat(chunks, length)
  } finally {
    reader.cancel().catch(() => {})
  }
}

function concat(chunks: Uint8Array[], length: number): Uint8Array {
  const all = Buffer.concat(chunks)
  return all.subarray(0, length)
}

function describeNetworkError(error: unknown): string {
  let cause: unknown = error
  // fetch wraps the real reason: "fetch failed" with a cause (which may have its own).
  while (cause instanceof Error && cause.cause instanceof Error && cause.message === 'fetch failed') cause = cause.cause
  if (cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code
    return code && !cause.message.includes(code) ? `${code}: ${cause.message}` : cause.message
  }
  return String(cause)
}
