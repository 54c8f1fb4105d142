/**
 * The interstitial: loads the link's pixels and the workspace's scripts, then moves on (see
 * interstitial-runtime.ts for the order). Without JavaScript a meta refresh moves on after a second, except
 * when consent is asked: then nothing loads and the visitor follows the link themselves.
 *
 * CSP: the page's script and what it inserts run by nonce; each platform adds the hosts its vendor lists.
 * The workspace's scripts are the workspace's own code (trusted by design) and load what they like: when a
 * page has any, script-src adds 'strict-dynamic' (scripts inserted by a trusted script are trusted) and
 * img/connect/frame/style/font sources widen to https:, since no list of hosts can be known for them.
 */
import { allow, baseDirectives, cspString, newNonce } from './csp.js'
import { html, httpUrl, jsonScript, raw } from './html.js'
import { isAppUrl } from './deep-links.js'
import { INTERSTITIAL_SCRIPT } from './interstitial-runtime.js'
import { displayUrl, documentHtml, mark } from './layout.js'
import { PIXEL_TAGS, pixelsByPlatform } from './pixel-tags.js'
import type { InterstitialOptions, Page } from './types.js'

/** HTML snippets start with a tag; anything else is JavaScript the page wraps in a script of its own. */
function snippetKind(content: string): 'html' | 'js' {
  return content.trimStart().startsWith('<') ? 'html' : 'js'
}

export function interstitialPage(options: InterstitialOptions): Page {
  const nonce = newNonce()
  const destination = httpUrl(options.destination)
  const groups = pixelsByPlatform(options.pixels)
  const pixels = groups.map(({ platform, ids }) => ({ platform, ids, scripts: PIXEL_TAGS[platform].scripts(ids) }))
  const scripts = options.scripts
    .filter((script) => script.content.trim() !== '')
    .map((script) => ({ kind: snippetKind(script.content), content: script.content }))
  // Only an app address of ours with an http(s) fallback: a page never links to javascript: or the like.
  const given = options.appLink
  const fallback = given ? httpUrl(given.fallback) : null
  const appLink = given && fallback && isAppUrl(given.url) ? { app: given.app, url: given.url, fallback } : null
  // The banner asks before pixels and scripts load (spec: "display the GDPR popup if pixels are present"); a page
  // with nothing to load (deep linking alone) has nothing to ask about.
  const askConsent = options.showGDPR && (pixels.length > 0 || scripts.length > 0)
  const data = { destination, consent: askConsent, pixels, scripts, appLink }

  const directives = baseDirectives(nonce)
  allow(directives, { 'script-src': [`'nonce-${nonce}'`] })
  for (const { platform } of groups) allow(directives, PIXEL_TAGS[platform].csp)
  if (scripts.length > 0) {
    // The workspace's scripts are its own, trusted as the specification has them: chat widgets and tag managers
    // load from hosts nobody can list in advance, set inline styles and some evaluate code. Styles then go by
    // 'unsafe-inline' (a nonce beside it would make browsers ignore it), the page's own stylesheet included.
    directives['style-src'] = new Set(["'unsafe-inline'"])
    allow(directives, {
      'script-src': ["'strict-dynamic'", "'unsafe-eval'", 'https:'],
      'img-src': ['https:'],
      'connect-src': ['https:'],
      'frame-src': ['https:'],
      'style-src': ['https:'],
      'font-src': ['https:'],
    })
  }

  const host = destination ? new URL(destination).host : ''
  const title = options.link.title || displayUrl(options.link.shortUrl)
  const heading = appLink ? `Opening ${appLink.app}…` : `Taking you to ${host}…`
  const continueLink = destination ? html`<a href="${destination}">Continue to ${host}</a>` : ''
  const platformNames = groups.map(({ platform }) => PIXEL_TAGS[platform].name)

  const progress = html`<section id="progress"${askConsent ? raw(' hidden') : ''}>
<div class="spinner" aria-hidden="true"></div>
<h1>${heading}</h1>
${options.link.title ? html`<p>${title}</p>` : ''}
${appLink
    ? html`<div class="actions stack"><a class="button" href="${appLink.url}">Open the app</a><a class="button secondary" href="${appLink.fallback}">Continue in the browser</a></div>`
    : html`<p class="small">If nothing happens: ${continueLink}</p>`}
</section>`

  const consent = askConsent
    ? html`<section id="consent" aria-labelledby="consent-title">
${mark('shield')}
<h1 id="consent-title">Before you continue</h1>
<p>This link would like to use cookies and similar technologies to measure visits${
        platformNames.length ? html` (${platformNames.join(', ')})` : ''
      }. Nothing is loaded unless you accept.</p>
<p class="small">You are going to <span class="host">${host}</span>.</p>
<div class="actions">
<a class="button secondary" id="decline" href="${destination ?? ''}">Decline</a>
<button class="button" id="accept" type="button" hidden>Accept</button>
</div>
<noscript><p class="small note">JavaScript is off, so nothing can be loaded: Decline takes you on.</p></noscript>
</section>`
    : ''

  // The vendors' own <noscript> images, for visitors without JavaScript; never when consent is asked.
  const noscriptImages = askConsent
    ? []
    : groups.flatMap(({ platform, ids }) => {
        const image = PIXEL_TAGS[platform].noscriptImage
        return image ? ids.map((id) => httpUrl(image(id))).filter((src) => src !== null) : []
      })
  const noscript = noscriptImages.length
    ? html`<noscript>${noscriptImages.map((src) => html`<img src="${src}" width="1" height="1" alt="" hidden>`)}</noscript>`
    : ''

  const refresh = destination && !askConsent
    ? html`<noscript><meta http-equiv="refresh" content="1;url=${destination}"></noscript>`
    : ''

  const body = html`<main>
${consent}
${progress}
</main>
${noscript}
${jsonScript('page-data', data)}
<script nonce="${nonce}">${raw(INTERSTITIAL_SCRIPT)}</script>`

  const page = documentHtml({ nonce, title, head: html`<meta name="robots" content="noindex">
${refresh}`, body })
  return { status: 200, html: page, csp: cspString(directives) }
}
