/** The 404 and 410 pages: a sentence for the visitor, nothing loaded. */
import { baseDirectives, cspString, newNonce } from './csp.js'
import { html } from './html.js'
import { documentHtml, mark } from './layout.js'
import type { Page } from './types.js'

function messagePage(status: number, icon: 'question' | 'clock', heading: string, text: string): Page {
  const nonce = newNonce()
  const body = html`<main>
${mark(icon)}
<h1>${heading}</h1>
<p>${text}</p>
</main>`
  return { status, html: documentHtml({ nonce, title: heading, body }), csp: cspString(baseDirectives(nonce)) }
}

export function notFoundPage(): Page {
  return messagePage(404, 'question', 'Link not found', 'This short link does not exist or has been removed. Check the address and try again.')
}

export function expiredPage(): Page {
  return messagePage(410, 'clock', 'This link has expired', 'The short link you followed is no longer active.')
}
