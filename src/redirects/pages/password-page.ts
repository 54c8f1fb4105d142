/**
 * The password form. It names the short address only, not the link's title or description: those are part
 * of what the password protects.
 */
import { baseDirectives, cspString, newNonce } from './csp.js'
import { html } from './html.js'
import { displayUrl, documentHtml } from './layout.js'
import type { Page, PageLink } from './types.js'

export function passwordPage(link: PageLink, options: { status: 200 | 401; error?: string }): Page {
  const nonce = newNonce()
  const error = options.status === 401 ? (options.error ?? 'That password is not right. Try again.') : null
  const body = html`<main>
<div class="mark" aria-hidden="true">&#128274;</div>
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
  // The form posts to this same address; nothing else may receive it.
  directives['form-action'] = new Set(["'self'"])
  return { status: options.status, html: documentHtml({ nonce, title: 'Password required', body }), csp: cspString(directives) }
}
