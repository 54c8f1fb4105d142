/**
 * The password form. It names the short address only, not the link's title or description: those are part
 * of what the password protects.
 */
import { allow, baseDirectives, cspString, newNonce } from './csp.js'
import { html, httpOrigin } from './html.js'
import { displayUrl, documentHtml, mark } from './layout.js'
import type { Page, PageLink } from './types.js'

export interface PasswordPageOptions {
  status: 200 | 401
  error?: string
  /**
   * Where a right password may lead: the link's url and its geolocation and rotator urls. Chromium applies
   * form-action to the redirect that answers the POST too, so without their origins the 302 onwards is
   * blocked and the visitor stays on the form.
   */
  destinations?: string[]
}

export function passwordPage(link: PageLink, options: PasswordPageOptions): Page {
  const nonce = newNonce()
  const error = options.status === 401 ? (options.error ?? 'That password is not right. Try again.') : null
  const body = html`<main>
${mark('lock')}
<h1>Password required</h1>
<p><span class="host">${displayUrl(link.shortUrl)}</span> is protected. Enter its password to continue.</p>
<form method="post" enctype="application/x-www-form-urlencoded">
<label for="password">Password</label>
<input id="password" name="password" type="password" required autofocus autocomplete="current-password"${
    error ? html` aria-invalid="true" aria-describedby="password-error"` : ''
  }>
${error ? html`<p class="error" id="password-error" role="alert">${error}</p>` : ''}
<div class="actions"><button class="button" type="submit">Continue</button></div>
</form>
</main>`
  const directives = baseDirectives(nonce)
  // The form posts to this same address, whose answer redirects to a destination; nothing else may receive it.
  directives['form-action'] = new Set(["'self'"])
  for (const destination of options.destinations ?? []) {
    const origin = httpOrigin(destination)
    if (origin) allow(directives, { 'form-action': [origin] })
  }
  return { status: options.status, html: documentHtml({ nonce, title: 'Password required', body }), csp: cspString(directives) }
}
