/**
 * The password form. It names the short address only, not the link's title or description: those are part
 * of what the password protects.
 */
import { baseDirectives, cspString, newNonce } from './csp.js'
import { html } from './html.js'
import { displayUrl, documentHtml, mark } from './layout.js'
import type { Page, PageLink } from './types.js'
import { LIMITS } from '../../../schemas/link.js'

export interface PasswordPageOptions {
  status: 200 | 401
  error?: string
}

/**
 * The field takes every password the API does: LIMITS.password characters, which a browser's maxlength counts in
 * UTF-16 units (an emoji is two). Its body then stays well under the form route's body limit.
 */
export function passwordPage(link: PageLink, options: PasswordPageOptions): Page {
  const nonce = newNonce()
  const error = options.status === 401 ? (options.error ?? 'That password is not right. Try again.') : null
  const body = html`<main>
${mark('lock')}
<h1>Password required</h1>
<p><span class="host">${displayUrl(link.shortUrl)}</span> is protected. Enter its password to continue.</p>
<form method="post" enctype="application/x-www-form-urlencoded">
<label for="password">Password</label>
<input id="password" name="password" type="password" required autofocus autocomplete="current-password" maxlength="${2 * LIMITS.password}"${
    error ? html` aria-invalid="true" aria-describedby="password-error"` : ''
  }>
${error ? html`<p class="error" id="password-error" role="alert">${error}</p>` : ''}
<div class="actions"><button class="button" type="submit">Continue</button></div>
</form>
</main>`
  const directives = baseDirectives(nonce)
  // The form posts to this same address (it has no action: nothing on the page can send it elsewhere). Chromium
  // applies form-action to every redirect of the navigation the POST starts: the 302 to the destination and then
  // the destination's own (example.com to www.example.com, a sign-in page), which may lead to any web origin.
  directives['form-action'] = new Set(["'self'", 'https:', 'http:'])
  return { status: options.status, html: documentHtml({ nonce, title: 'Password required', body }), csp: cspString(directives) }
}
