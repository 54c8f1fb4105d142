/**
 * What social and search crawlers get: the link's preview (Open Graph and Twitter card), a readable page
 * for anyone else, and nothing that runs or moves on.
 */
import { baseDirectives, cspString, newNonce } from './csp.js'
import { html, httpUrl } from './html.js'
import { displayUrl, documentHtml } from './layout.js'
import type { Page, PageLink } from './types.js'

/** The Open Graph and Twitter card tags of a link (shared with the masking page). */
export function previewMeta(link: PageLink) {
  const title = link.title || displayUrl(link.shortUrl)
  const image = httpUrl(link.image)
  const url = httpUrl(link.shortUrl)
  return html`<meta property="og:type" content="website">
<meta property="og:title" content="${title}">
${link.description ? html`<meta name="description" content="${link.description}">
<meta property="og:description" content="${link.description}">
` : ''}${image ? html`<meta property="og:image" content="${image}">
` : ''}${url ? html`<meta property="og:url" content="${url}">
` : ''}<meta name="twitter:card" content="${image ? 'summary_large_image' : 'summary'}">
<meta name="twitter:title" content="${title}">
${link.description ? html`<meta name="twitter:description" content="${link.description}">
` : ''}${image ? html`<meta name="twitter:image" content="${image}">
` : ''}`
}

export function crawlerPage(link: PageLink): Page {
  const nonce = newNonce()
  const title = link.title || displayUrl(link.shortUrl)
  const body = html`<main>
<h1>${title}</h1>
${link.description ? html`<p>${link.description}</p>` : ''}
<p class="small">${displayUrl(link.shortUrl)}</p>
</main>`
  const page = documentHtml({ nonce, title, head: previewMeta(link), body })
  return { status: 200, html: page, csp: cspString(baseDirectives(nonce)) }
}
