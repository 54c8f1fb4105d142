/**
 * The visitor pages: what the redirect core sends when a visit is not a plain 302. The core decides which
 * page (contract §11); each function here renders one, with its status and its Content-Security-Policy.
 * Every value of a link is escaped for where it goes (html.ts); the workspace's scripts are the one
 * deliberate exception.
 */
export type { AppLink, InterstitialOptions, Page, PageLink, PhoneOs } from './types.js'
export { notFoundPage, expiredPage } from './status-pages.js'
export { passwordPage, type PasswordPageOptions } from './password-page.js'
export { crawlerPage } from './crawler-page.js'
export { maskingPage } from './masking-page.js'
export { interstitialPage } from './interstitial-page.js'
export { phoneOs, appLinkFor } from './deep-links.js'
