/** Shared by the visitor-side tests: a workspace with a short domain, visits as browsers and crawlers send them. */
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { client, createWorkspaceToken, json, type TestApp } from '../support/test-app.js'

export const DESKTOP = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36'
export const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1'
export const ANDROID_PHONE =
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36'
export const FACEBOOK_CRAWLER = 'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)'

export const SHORT_DOMAIN = 'go.acme.test'

/** A workspace `acme` owning go.acme.test, known to the app's short-domain set; returns the API client. */
export async function acmeWorkspace({ app, prisma }: TestApp, workspace = 'acme', domain = SHORT_DOMAIN) {
  const token = await createWorkspaceToken(prisma, { workspace, domains: [domain] })
  await app.redirects.domains.refresh()
  const api = client(app, token)
  /** Creates a link on the domain (no autofill) and returns its record. */
  const link = async (fields: Record<string, unknown>) => {
    const response = await api.create({ domain, url: 'https://example.com/landing', ...fields }, { autofill: false })
    if (response.statusCode !== 201) throw new Error(`create: ${response.statusCode} ${response.body}`)
    return json(response)
  }
  return { token, api, link }
}

/** A visit of `path` on a host (go.acme.test by default) from a desktop browser unless told otherwise. */
export function visit(
  app: FastifyInstance,
  path: string,
  options: { host?: string; headers?: Record<string, string>; method?: InjectOptions['method']; remoteAddress?: string } = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: options.method ?? 'GET',
    url: path,
    remoteAddress: options.remoteAddress,
    headers: { host: options.host ?? SHORT_DOMAIN, 'user-agent': DESKTOP, ...options.headers },
  })
}

/** The password form as a browser posts it. */
export function postPassword(
  app: FastifyInstance,
  path: string,
  password: string,
  options: { host?: string; cookie?: string; remoteAddress?: string } = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: path,
    remoteAddress: options.remoteAddress,
    headers: {
      host: options.host ?? SHORT_DOMAIN,
      'user-agent': DESKTOP,
      'content-type': 'application/x-www-form-urlencoded',
      ...(options.cookie ? { cookie: options.cookie } : {}),
    },
    payload: new URLSearchParams({ password }).toString(),
  })
}

/** A small seeded generator (mulberry32): the rotator's draws repeat from run to run. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Asserts the headers every page carries. */
export function pageHeaders(response: LightMyRequestResponse) {
  return {
    status: response.statusCode,
    type: response.headers['content-type'],
    cacheControl: response.headers['cache-control'],
    hasCsp: typeof response.headers['content-security-policy'] === 'string' && response.headers['content-security-policy'].length > 0,
    location: response.headers.location,
  }
}
