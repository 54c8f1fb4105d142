/**
 * Turns an Answer into HTTP. A 302 says `Cache-Control: private, max-age=0` (the contract's); pages say
 * `private, no-store`, since what they show depends on the visit (a password error, a deep link for this
 * phone, a fresh CSP nonce) and must never be served to another visitor by a shared cache.
 */
import type { FastifyReply } from 'fastify'
import type { Answer } from './evaluate.js'
import {
  crawlerPage,
  expiredPage,
  interstitialPage,
  maskingPage,
  notFoundPage,
  passwordPage,
  type Page,
  type PageLink,
} from './pages/index.js'
import type { RedirectView } from './redirect-view.js'

export const REDIRECT_CACHE_CONTROL = 'private, max-age=0'
export const PAGE_CACHE_CONTROL = 'private, no-store'

/** What the visit's answer may add: a cookie after the right password, or the outcome of a wrong one. */
export interface AnswerExtras {
  setCookie?: string
  /**
   * The password form again, after a wrong password (401), too many (429, with Retry-After), or a try that could
   * not be checked for now (503, with Retry-After).
   */
  passwordError?: { status: 401 | 429 | 503; message: string; retryAfterSeconds?: number }
}

export function pageLink(view: RedirectView): PageLink {
  return {
    title: view.title,
    description: view.description,
    image: view.image,
    favicon: view.favicon,
    shortUrl: `https://${view.domain}/${view.slug}`,
  }
}

export function sendPage(reply: FastifyReply, page: Page): FastifyReply {
  return reply
    .code(page.status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('content-security-policy', page.csp)
    .header('cache-control', PAGE_CACHE_CONTROL)
    .header('x-content-type-options', 'nosniff')
    .send(page.html)
}

export function sendRedirect(reply: FastifyReply, location: string): FastifyReply {
  return reply.code(302).header('location', location).header('cache-control', REDIRECT_CACHE_CONTROL).send()
}

export function sendAnswer(reply: FastifyReply, view: RedirectView | null, answer: Answer, extras: AnswerExtras = {}): FastifyReply {
  if (extras.setCookie) reply.header('set-cookie', extras.setCookie)
  switch (answer.kind) {
    case 'not-found':
      return sendPage(reply, notFoundPage())
    case 'expired':
      return sendRedirect(reply, answer.location)
    case 'gone':
      return sendPage(reply, expiredPage())
    case 'redirect':
      return sendRedirect(reply, answer.destination)
  }
  const link = pageLink(view!)
  switch (answer.kind) {
    case 'password': {
      const failure = extras.passwordError
      if (!failure) return sendPage(reply, passwordPage(link, { status: 200 }))
      if (failure.retryAfterSeconds !== undefined) reply.header('retry-after', String(failure.retryAfterSeconds))
      // The form again with its message; a 429 is that same page under its own status.
      return sendPage(reply, { ...passwordPage(link, { status: 401, error: failure.message }), status: failure.status })
    }
    case 'crawler':
      return sendPage(reply, crawlerPage(link))
    case 'masking':
      return sendPage(reply, maskingPage(link, answer.destination))
    case 'interstitial':
      return sendPage(
        reply,
        interstitialPage({
          link,
          destination: answer.destination,
          pixels: view!.pixels,
          scripts: view!.scripts,
          showGDPR: view!.showGDPR,
          appLink: answer.appLink,
        }),
      )
  }
}
