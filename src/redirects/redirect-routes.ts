/**
 * The visitor side (contract section 11): `GET`/`HEAD /<slug>` and the password form's `POST /<slug>` on the
 * short domains, plus robots.txt, favicon.ico and the QR codes `/<slug>/qr` (src/qr/qr-public-route.ts) there.
 * On any other host these paths are what they were: the API's problem+json 404. API routes are static paths,
 * which Fastify's router prefers to `/:slug`, so they work on every host. No line is logged per visit below `warn` (the counters say how many); errors are.
 */
import formbody from '@fastify/formbody'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { LIMITS } from '../../schemas/link.js'
import { notFound, unsupportedMediaType } from '../errors/app-error.js'
import { publicQrRoute } from '../qr/qr-public-route.js'
import { verifyPassword } from '../links/password.js'
import { sendProblem } from '../plugins/errors.js'
import { VISITOR_PRESSURE } from '../plugins/overload.js'
import type { VisitCounters } from '../plugins/redirects.js'
import { visitorCountry } from './destination.js'
import { evaluate, isExpired, NOT_FOUND, type Answer } from './evaluate.js'
import type { RedirectView } from './redirect-view.js'
import { sendAnswer, sendPage, sendRedirect, type AnswerExtras } from './respond.js'
import { notFoundPage } from './pages/index.js'
import { quietChildLogger } from '../plugins/quiet-logger.js'
import { clientAddress } from '../plugins/client-address.js'
import { requestedHost } from '../plugins/request-target.js'
import { codePointLength } from '../../schemas/formats.js'
import type { Visit } from './visits.js'

const SLUG = new RegExp(`^[A-Za-z0-9_-]{1,${LIMITS.slug}}$`)
const ROBOTS_TXT = 'User-agent: *\nAllow: /\n'
/** The password form is small; anything much larger is not from it. */
const FORM_BODY_LIMIT = 4096

type SlugRoute = { Params: { slug: string } }

/**
 * The path and query of the request's own address. A request target in absolute form (`POST http://elsewhere/x`,
 * which a proxy may pass on) keeps neither its scheme nor its host: the visitor stays on the short domain.
 */
function ownAddress(target: string): string {
  const { pathname, search } = new URL(target, 'http://short.invalid')
  return pathname + search
}

/** Whether the visitor came over HTTPS; a scheme is case-insensitive, as a proxy's X-Forwarded-Proto may be too. */
const isHttps = (request: FastifyRequest) => request.protocol?.toLowerCase() === 'https'

const COUNTER: Record<Answer['kind'], keyof VisitCounters> = {
  'not-found': 'notFound',
  expired: 'expired',
  gone: 'gone',
  password: 'password',
  crawler: 'crawler',
  masking: 'masking',
  interstitial: 'interstitial',
  redirect: 'redirect',
}

export default async function redirectRoutes(app: FastifyInstance, options: { countryHeader: string }) {
  const { redirects } = app
  const { counters, cookies, throttle, passwordChecks } = redirects
  // Both in this plugin's scope only: the API keeps accepting JSON bodies alone, and its request logs.
  await app.register(formbody, { bodyLimit: FORM_BODY_LIMIT })
  app.setChildLoggerFactory(quietChildLogger)
  const visitorRoute = { logLevel: 'warn', schema: { hide: true }, config: VISITOR_PRESSURE } as const

  const shortHost = (request: FastifyRequest) => redirects.domains.hostOf(requestedHost(request))
  /**
   * The API's 404 on a host that is not a short domain: the request is an API request after all, and is logged as
   * one (this scope's logger is the visitors' quiet one).
   */
  const notARoute = (reply: FastifyReply) => {
    reply.log = reply.request.log = app.log.child({ reqId: reply.request.id })
    return sendProblem(reply, notFound('route'))
  }

  /** Sends the answer of a known (or unknown) link and, once sent, hands a visit that reached its destination on. */
  function answerVisit(
    request: FastifyRequest,
    reply: FastifyReply,
    view: RedirectView | null,
    extras: AnswerExtras & { unlocked?: boolean; unlockedByForm?: boolean } = {},
  ) {
    if (view === null) {
      counters.notFound++
      return sendAnswer(reply, null, NOT_FOUND)
    }
    const userAgent = request.headers['user-agent']
    const country = visitorCountry(request.headers[options.countryHeader])
    const queryAt = request.url.indexOf('?')
    const query = queryAt === -1 ? '' : request.url.slice(queryAt + 1)
    const unlocked =
      extras.unlocked ??
      (view.passwordHash === null || cookies.allows({ uniq: view.uniq, passwordHash: view.passwordHash }, request.headers.cookie))
    const answer = evaluate(view, { userAgent, country, query, unlocked, secure: isHttps(request) }, redirects.now(), redirects.random)
    if (extras.unlockedByForm && (answer.kind === 'masking' || answer.kind === 'interstitial')) {
      // A form posted to a link that shows a page, the right password (or a cookie that opens it already): 302 to
      // the link's own address, whose GET (with the cookie) shows it and records the visit. A reload then does not
      // post the form again, and the masked page's address is the short one.
      if (extras.setCookie) reply.header('set-cookie', extras.setCookie)
      sendRedirect(reply, ownAddress(request.url))
      return reply
    }
    // A password try was counted by its route, as what it was (wrong, throttled): one answer per visit.
    if (!extras.passwordError) counters[COUNTER[answer.kind]]++
    sendAnswer(reply, view, answer, extras)
    if (request.method !== 'HEAD') {
      const reached = answer.kind === 'redirect' || answer.kind === 'masking' || answer.kind === 'interstitial'
      // A preview is recorded too, as a bot visit (the analytics tell them apart).
      if (reached || answer.kind === 'crawler') {
        handOn({
          link: view.uniq,
          workspaceId: view.workspaceId,
          domain: view.domain,
          answer: answer.kind,
          destination: reached ? answer.chosenUrl : view.target.url,
          reason: reached ? answer.reason : 'default',
          at: redirects.now(),
          country,
          userAgent,
          referrer: request.headers.referer,
          address: clientAddress(request),
        })
      }
    }
    return reply
  }

  // Visits are handed to app.visits after the answers are written (setImmediate runs once this turn of the event
  // loop has sent them), all of one turn together: nothing done for their record delays a visitor.
  let handingOn: Visit[] = []
  function handOn(visit: Visit): void {
    if (handingOn.push(visit) === 1) setImmediate(recordVisits)
  }
  function recordVisits(): void {
    const visits = handingOn
    handingOn = []
    for (const visit of visits) {
      try {
        app.visits.record(visit)
      } catch (error) {
        app.log.error({ err: error }, 'redirects: recording a visit failed')
      }
    }
  }

  /**
   * A visit of `/<slug>`. A warm link is answered synchronously: no promise in between, and nothing returned (a
   * returned reply would make Fastify wait for the response to finish).
   */
  function visitSlug(request: FastifyRequest, reply: FastifyReply, host: string, slug: string) {
    const view = SLUG.test(slug) ? redirects.lookup(host, slug) : null
    if (view instanceof Promise) return view.then((loaded) => answerVisit(request, reply, loaded))
    answerVisit(request, reply, view)
  }

  app.get<SlugRoute>('/:slug', visitorRoute, function visit(request, reply) {
    const host = shortHost(request)
    if (host === null) {
      notARoute(reply)
      return
    }
    return visitSlug(request, reply, host, request.params.slug)
  })

  const passwordRoute = {
    ...visitorRoute,
    bodyLimit: FORM_BODY_LIMIT,
    onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
      if (shortHost(request) === null) return notARoute(reply)
      if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(request.headers['content-type'] ?? '')) {
        throw unsupportedMediaType('The body must be sent as Content-Type: application/x-www-form-urlencoded')
      }
    },
  }
  async function submitPassword(request: FastifyRequest<SlugRoute>, reply: FastifyReply) {
    const host = shortHost(request)!
    const { slug } = request.params
    const view = SLUG.test(slug) ? await redirects.lookup(host, slug) : null
    const now = redirects.now()
    // Only a live protected link takes a password; otherwise the form's address answers as its GET would. So it does
    // for a visitor whose cookie opens the link already: the browser sent an old form again (back, reload), and its
    // password, right or wrong, is neither checked nor counted.
    if (view === null || isExpired(view, now) || view.passwordHash === null) return answerVisit(request, reply, view)
    if (cookies.allows({ uniq: view.uniq, passwordHash: view.passwordHash }, request.headers.cookie)) {
      return answerVisit(request, reply, view, { unlocked: true, unlockedByForm: true })
    }
    const password = (request.body as Record<string, unknown> | undefined)?.password
    if (typeof password !== 'string' || password === '') {
      // The form sends the field once; given twice (the parser then makes a list) it is neither checked nor counted.
      const message = Array.isArray(password) ? 'Send the password once.' : 'Enter the password.'
      counters.password++
      return answerVisit(request, reply, view, { unlocked: false, passwordError: { status: 401, message } })
    }
    const address = clientAddress(request)
    const decision = await throttle.take(view.uniq, address, now)
    if (!decision.allowed) {
      counters.throttled++
      const minutes = Math.ceil(decision.retryAfterSeconds / 60)
      const message = `Too many wrong passwords. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`
      return answerVisit(request, reply, view, {
        unlocked: false,
        passwordError: { status: 429, message, retryAfterSeconds: decision.retryAfterSeconds },
      })
    }
    // scrypt, compared with timingSafeEqual (src/links/password.ts); longer than any stored password is wrong.
    // The limit counts characters as the API's schema does (an emoji is one, though two UTF-16 units).
    const withinLimit = password.length <= 2 * LIMITS.password && codePointLength(password) <= LIMITS.password
    const right = withinLimit && (await passwordChecks.run(() => verifyPassword(password, view.passwordHash!)))
    if (right === 'busy') {
      // Not checked: the try is not counted against the visitor.
      throttle.giveBack(view.uniq, address, decision.ticket)
      counters.checksBusy++
      return answerVisit(request, reply, view, {
        unlocked: false,
        passwordError: { status: 503, message: 'Too many passwords are being checked right now. Try again in a moment.', retryAfterSeconds: 2 },
      })
    }
    if (!right) {
      counters.wrongPassword++
      return answerVisit(request, reply, view, {
        unlocked: false,
        passwordError: { status: 401, message: 'That password is not right. Try again.' },
      })
    }
    throttle.giveBack(view.uniq, address, decision.ticket)
    const setCookie = cookies.issue({ uniq: view.uniq, passwordHash: view.passwordHash }, isHttps(request))
    return answerVisit(request, reply, view, { unlocked: true, unlockedByForm: true, setCookie })
  }
  // The form posts to the address it was shown at, `/<slug>/` included.
  for (const url of ['/:slug', '/:slug/']) app.post<SlugRoute>(url, passwordRoute, submitPassword)
  // A POST to any other path of a short domain (a form sent again from an odd address) names no link either: the
  // 404 page, as its GET gets. Answered before the body is read; elsewhere it is the API's 404 it was.
  const otherPost = {
    ...visitorRoute,
    // Answers every request, so the handler never runs.
    onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
      if (shortHost(request) === null) return notARoute(reply)
      counters.notFound++
      return sendPage(reply, notFoundPage())
    },
  }
  app.post('/*', otherPost, () => {})

  // The link's QR code, in this scope for its quiet logger and host rules; not a visit.
  publicQrRoute(app, { shortHost, notARoute })

  // Lets link previews (crawlers) read every link page.
  app.get('/robots.txt', visitorRoute, (request, reply) => {
    if (shortHost(request) === null) return notARoute(reply)
    return reply.type('text/plain; charset=utf-8').header('cache-control', 'public, max-age=86400').send(ROBOTS_TXT)
  })

  // Browsers ask for it on every page; an empty 404 they may remember for a day, at no cost.
  app.get('/favicon.ico', visitorRoute, (request, reply) => {
    if (shortHost(request) === null) return notARoute(reply)
    return reply.code(404).header('cache-control', 'public, max-age=86400').send()
  })

  // `/<slug>/` is the link (an address typed or pasted with a slash at the end); any other path of a short domain
  // (`/`, `/a/b`) is no link: the 404 page, not the API's JSON.
  app.get<{ Params: { '*': string } }>('/*', visitorRoute, (request, reply) => {
    const host = shortHost(request)
    if (host === null) return notARoute(reply)
    const slash = request.params['*'].indexOf('/')
    if (slash > 0 && slash === request.params['*'].length - 1) return visitSlug(request, reply, host, request.params['*'].slice(0, -1))
    counters.notFound++
    return sendPage(reply, notFoundPage())
  })
}
