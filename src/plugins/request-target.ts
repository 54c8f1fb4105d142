/**
 * What a request is for, read from its request target as well as from its headers: a target may be in absolute
 * form (`GET http://go.acme.com/summer HTTP/1.1`, as a forward proxy passes it on), where RFC 9112 section 3.2.2
 * has the Host header ignored and the path is not the whole of `request.url`.
 */
import type { FastifyRequest } from 'fastify'

const ABSOLUTE_FORM = /^https?:\/\//i

/** The target's own URL when it is in absolute form, else null. */
function absoluteTarget(url: string): URL | null {
  if (url.startsWith('/') || !ABSOLUTE_FORM.test(url)) return null
  try {
    return new URL(url)
  } catch {
    return null
  }
}

/**
 * The host name the request is for: what a trusted proxy's X-Forwarded-Host says (the visitor's own request, as the
 * proxy received it), else an absolute-form target's host, else the Host header's (request.hostname).
 */
export function requestedHost(request: FastifyRequest): string {
  const target = absoluteTarget(request.url)
  // request.host is X-Forwarded-Host only when it came from a proxy TRUST_PROXY trusts.
  const forwarded = request.host !== (request.headers.host ?? '')
  return target === null || forwarded ? request.hostname : target.hostname
}

/**
 * Whether the target is in absolute form with user information (`http://evil.example@go.acme.com/x`): RFC 9110
 * section 4.2.4 has a recipient treat it as an error, since people and programs read such a URL's host differently.
 */
export function hasUserinfo(url: string): boolean {
  if (!ABSOLUTE_FORM.test(url)) return false
  // The authority: from after the scheme's `//` to the path, query or fragment. An `@` there, even with nothing before it.
  const start = url.indexOf('//') + 2
  const end = url.slice(start).search(/[/?#]/)
  return url.slice(start, end === -1 ? undefined : start + end).includes('@')
}

/** Whether the request is for the API (`/v1/...`), whichever form its target has. */
export function isApiRequest(url: string): boolean {
  return url.startsWith('/v1/') || (absoluteTarget(url)?.pathname.startsWith('/v1/') ?? false)
}
