/**
 * Masking: the short address stays in the address bar and the destination fills the whole viewport in a
 * frame. The frame may load any https origin (and http ones for an http destination): destinations often move
 * to another host of their site (example.com → www.example.com, a sign-in page, a tracker's redirect), and a
 * frame-src of the first origin alone showed the browser's "content is blocked" instead. The page runs no script
 * of the link's, so the wider frame-src frames nothing the destination could not open in its frame anyway. A
 * destination that forbids framing (X-Frame-Options, frame-ancestors) shows the browser's own message, which no
 * page of ours can change.
 *
 * An http: destination cannot be framed by a page shown over https: (mixed content, a blank page). A visit known to
 * be over HTTPS is not masked at all (evaluate.ts); for one that is without the service knowing it (TLS ended by a
 * proxy that does not say so, or is not trusted to), the page's one line of script sends the visitor to the
 * destination itself.
 */
import { allow, baseDirectives, cspString, newNonce } from './csp.js'
import { html, httpOrigin, httpUrl, jsonForScript, raw } from './html.js'
import { previewMeta } from './crawler-page.js'
import { displayUrl, documentHtml } from './layout.js'
import type { Page, PageLink } from './types.js'

const FRAME_STYLE = `html, body { margin: 0; height: 100%; overflow: hidden; background: #fff; }
iframe { display: block; position: fixed; inset: 0; width: 100vw; height: 100vh; height: 100dvh; border: 0; }`

export function maskingPage(link: PageLink, destination: string): Page {
  const nonce = newNonce()
  const title = link.title || displayUrl(link.shortUrl)
  const src = httpUrl(destination)
  const favicon = httpUrl(link.favicon)
  const directives = baseDirectives(nonce)
  const frameOrigin = httpOrigin(src)
  if (frameOrigin) allow(directives, { 'frame-src': frameOrigin.startsWith('http:') ? ['http:', 'https:'] : ['https:'] })
  const faviconOrigin = httpOrigin(favicon)
  if (faviconOrigin) allow(directives, { 'img-src': [faviconOrigin] })
  const insecureFrame = frameOrigin?.startsWith('http:') ?? false
  if (insecureFrame) allow(directives, { 'script-src': [`'nonce-${nonce}'`] })
  const leaveHttps = insecureFrame
    ? html`<script nonce="${nonce}">if (location.protocol === 'https:') location.replace(${raw(jsonForScript(src))})</script>`
    : ''
  const body = src ? html`${leaveHttps}<iframe src="${src}" title="${title}" allow="fullscreen; clipboard-write"></iframe>` : ''
  const page = documentHtml({ nonce, title, icon: favicon, head: previewMeta(link), body, style: FRAME_STYLE })
  return { status: 200, html: page, csp: cspString(directives) }
}
