/**
 * HTTP on a raw TCP socket, for what app.inject and HTTP clients cannot send or do not show: malformed
 * request lines and headers, oversized headers, bad percent-encoding on the wire, and whether the server
 * answered at all or reset the connection.
 */
import { connect, type Socket } from 'node:net'

export interface RawResponse {
  /** 0 when no status line arrived. */
  status: number
  /** Lower-case names. */
  headers: Record<string, string>
  body: string
  /** The whole answer: a status line, headers and exactly Content-Length bytes of body. */
  complete: boolean
  /** The socket error, if the connection failed (ECONNRESET: the server reset it). */
  error?: string
}

/** Parses what a server sent on one connection (the first response on it), read as latin1. */
export function parseResponse(text: string, error?: string): RawResponse {
  const end = text.indexOf('\r\n\r\n')
  const status = Number(/^HTTP\/1\.[01] (\d{3}) /.exec(text)?.[1] ?? 0)
  if (end < 0) return { status, headers: {}, body: '', complete: false, error }
  const headers: Record<string, string> = {}
  for (const line of text.slice(0, end).split('\r\n').slice(1)) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  // The text is read as latin1, one character per byte, so lengths here are byte counts.
  const body = text.slice(end + 4)
  const length = Number(headers['content-length'])
  const complete = status > 0 && Number.isInteger(length) && body.length >= length
  return { status, headers, body: Buffer.from(body.slice(0, length), 'latin1').toString('utf8'), complete, error }
}

/** Collects what the server sends on `socket` until it closes the connection (or `timeoutMs` passes). */
export function readUntilClosed(socket: Socket, timeoutMs = 20_000): Promise<RawResponse> {
  return new Promise((resolve) => {
    let text = ''
    let error: string | undefined
    const timer = setTimeout(() => {
      error = 'timed out waiting for the server to close the connection'
      socket.destroy()
    }, timeoutMs)
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => (text += chunk))
    socket.on('error', (failure: NodeJS.ErrnoException) => (error = failure.code ?? failure.message))
    socket.on('close', () => {
      clearTimeout(timer)
      resolve(parseResponse(text, error))
    })
  })
}

/** Opens a connection and waits until it is established. */
export function openConnection(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket))
    socket.once('error', reject)
  })
}

/** Sends `request` verbatim on a new connection and returns the server's answer once it closes the connection. */
export async function rawRequest(port: number, request: string | Buffer): Promise<RawResponse> {
  const socket = await openConnection(port)
  const answer = readUntilClosed(socket)
  socket.write(request)
  return answer
}
