/** The document every visitor page shares: doctype, viewport, one small stylesheet, a card in the middle. */
import { html, raw, type HtmlValue, type SafeHtml } from './html.js'

const STYLE = `
:root { color-scheme: light dark; --bg: #f4f5f7; --card: #fff; --text: #1d2330; --muted: #5c6474;
  --line: #e2e5ea; --accent: #2454d6; --accent-text: #fff; --error: #b42318; }
@media (prefers-color-scheme: dark) { :root { --bg: #14171c; --card: #1e232b; --text: #e9ecf1; --muted: #a3abb8;
  --line: #303742; --accent: #6d95ff; --accent-text: #0b1020; --error: #ff8a80; } }
* { box-sizing: border-box; }
html, body { margin: 0; }
body { min-height: 100vh; display: flex; align-items: center; justify-content: center; padding: 1.25rem;
  background: var(--bg); color: var(--text); line-height: 1.5;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { width: 100%; max-width: 26rem; background: var(--card); border: 1px solid var(--line); border-radius: 14px;
  padding: 1.75rem 1.5rem; box-shadow: 0 1px 3px rgba(0,0,0,.06), 0 8px 24px rgba(0,0,0,.06); }
h1 { font-size: 1.3rem; line-height: 1.3; margin: 0 0 .5rem; overflow-wrap: anywhere; }
p { margin: 0 0 1rem; color: var(--muted); overflow-wrap: anywhere; }
p:last-child { margin-bottom: 0; }
.mark { width: 2.75rem; height: 2.75rem; border-radius: 50%; display: flex; align-items: center; justify-content: center;
  background: var(--bg); color: var(--accent); margin-bottom: 1rem; }
.mark svg { width: 1.4rem; height: 1.4rem; }
.host { color: var(--text); font-weight: 600; }
a { color: var(--accent); }
label { display: block; font-weight: 600; margin-bottom: .35rem; }
input[type=password] { width: 100%; font: inherit; padding: .7rem .8rem; border: 1px solid var(--line); border-radius: 10px;
  background: var(--bg); color: var(--text); }
input[type=password]:focus { outline: 2px solid var(--accent); outline-offset: 1px; }
.actions { display: flex; gap: .75rem; margin-top: 1rem; flex-wrap: wrap; }
.button { flex: 1 1 8rem; display: inline-flex; align-items: center; justify-content: center; min-height: 2.9rem;
  padding: .6rem 1rem; border-radius: 10px; font: inherit; font-weight: 600; text-decoration: none; cursor: pointer;
  border: 1px solid var(--accent); background: var(--accent); color: var(--accent-text); }
.button.secondary { background: transparent; color: var(--accent); }
.actions.stack { flex-direction: column; }
.actions.stack .button { flex: 0 0 auto; }
.note { margin-top: .75rem; }
.error { color: var(--error); font-weight: 600; margin: .5rem 0 0; }
.spinner { width: 1.6rem; height: 1.6rem; border-radius: 50%; border: 3px solid var(--line); border-top-color: var(--accent);
  animation: spin .8s linear infinite; margin-bottom: 1rem; }
@keyframes spin { to { transform: rotate(360deg); } }
@media (prefers-reduced-motion: reduce) { .spinner { animation: none; } }
.small { font-size: .875rem; }
[hidden] { display: none !important; }
`

const ICON_PATHS = {
  lock: '<rect x="5" y="11" width="14" height="10" rx="2"/><path d="M8 11V7a4 4 0 0 1 8 0v4"/>',
  question: '<circle cx="12" cy="12" r="10"/><path d="M9.1 9a3 3 0 0 1 5.8 1c0 2-3 3-3 3"/><path d="M12 17h.01"/>',
  clock: '<circle cx="12" cy="12" r="10"/><path d="M12 6v6l4 2"/>',
  shield: '<path d="M12 22s8-4 8-10V5l-8-3-8 3v7c0 6 8 10 8 10z"/><path d="m9 12 2 2 4-4"/>',
}

/** A round badge with a line icon (inline SVG: no request, nothing for the CSP to allow). */
export function mark(icon: keyof typeof ICON_PATHS): SafeHtml {
  return raw(`<div class="mark" aria-hidden="true"><svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">${ICON_PATHS[icon]}</svg></div>`)
}

export interface DocumentParts {
  nonce: string
  title: string
  head?: HtmlValue
  body: HtmlValue
  /** Replaces the shared stylesheet (the masking page needs only its frame). */
  style?: string
  /** An http(s) favicon (its origin must be in img-src); without one an empty icon spares a /favicon.ico request. */
  icon?: string | null
}

export function documentHtml(parts: DocumentParts): string {
  const page: SafeHtml = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${parts.title}</title>
<link rel="icon" href="${parts.icon ?? 'data:,'}">
${parts.head}
<style nonce="${parts.nonce}">${raw(parts.style ?? STYLE)}</style>
</head>
<body>
${parts.body}
</body>
</html>
`
  return page.value
}

/** `go.acme.com/summer` from `https://go.acme.com/summer`: how a page names the short link to a person. */
export function displayUrl(url: string): string {
  return url.replace(/^https?:\/\//i, '').replace(/\/$/, '')
}
