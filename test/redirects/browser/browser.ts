/**
 * Headless Chromium for the visitor-page tests: Debian's /usr/bin/chromium driven by playwright-core,
 * short domains and the destination's host resolved to 127.0.0.1 and every other name to nothing, and
 * every third-party request answered here (an empty 200 script) and counted, so nothing leaves the machine.
 */
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance } from 'fastify'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { buildTestApp } from '../../support/test-app.js'
import { acmeWorkspace, SHORT_DOMAIN } from '../visit-support.js'

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
export const SCREENSHOTS = join(process.cwd(), 'test-artifacts', 'screenshots')
export const PHONE = { width: 390, height: 844 }
export const DESKTOP = { width: 1280, height: 800 }
export const IPHONE_UA =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1'
export const ANDROID_UA =
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36'

interface Teardown {
  teardown(fn: () => unknown): void
}

/**
 * Chromium with `hosts` mapped to 127.0.0.1. A missing browser fails the test file with the way to install
 * it: these tests are never skipped silently.
 */
export function requireChromium(): void {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium is missing at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (or set CHROMIUM_PATH)`)
  }
}

export async function launchBrowser(t: Teardown, hosts: string[]): Promise<Browser> {
  requireChromium()
  const rules = [...hosts.map((host) => `MAP ${host} 127.0.0.1`), 'MAP * ~NOTFOUND'].join(', ')
  // Playwright gives every launch a fresh temporary --user-data-dir of its own.
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      `--host-resolver-rules=${rules}`,
    ],
  })
  t.teardown(() => browser.close())
  return browser
}

export interface Visit {
  context: BrowserContext
  page: Page
  /** Every request to a host that is not ours, in order (answered with an empty script, never sent). */
  thirdParty: string[]
  /** Dialogs (alert, confirm, prompt) the page opened: an injection that ran would show here. */
  dialogs: string[]
  /** Console messages and page errors. */
  console: string[]
  /** Every request of the page, in order, whatever its scheme (an app's URL scheme too). */
  requests: string[]
}

/** A fresh context (no cookies) and page, watched: third-party requests, dialogs, console. */
export async function openPage(
  browser: Browser,
  localHosts: string[],
  options: { viewport?: { width: number; height: number }; userAgent?: string; javaScriptEnabled?: boolean } = {},
): Promise<Visit> {
  const context = await browser.newContext({
    viewport: options.viewport ?? PHONE,
    // Headless Chromium says "HeadlessChrome", which bot detection rightly takes for a crawler.
    userAgent: options.userAgent ?? `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${browser.version()} Safari/537.36`,
    javaScriptEnabled: options.javaScriptEnabled ?? true,
    deviceScaleFactor: 1,
  })
  const visit: Visit = { context, page: await context.newPage(), thirdParty: [], dialogs: [], console: [], requests: [] }
  visit.page.on('request', (request) => visit.requests.push(request.url()))
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url())
    if (localHosts.includes(url.hostname)) return route.continue()
    visit.thirdParty.push(url.href)
    if (route.request().resourceType() === 'document') {
      return route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>third party</title>' })
    }
    return route.fulfill({ status: 200, contentType: 'application/javascript', body: '' })
  })
  visit.page.on('dialog', (dialog) => {
    visit.dialogs.push(`${dialog.type()}: ${dialog.message()}`)
    void dialog.dismiss()
  })
  visit.page.on('console', (message) => visit.console.push(`${message.type()}: ${message.text()}`))
  visit.page.on('pageerror', (error) => visit.console.push(`pageerror: ${error.message}`))
  return visit
}

/**
 * Serves the page at `url` as the service answers it, but with its no-JavaScript refresh an hour away instead of
 * a second, so that a screenshot of it is never taken mid-navigation (on a loaded machine such a screenshot waited
 * its whole 30 s for a frame). Only that delay changes; the tests of the refresh itself use the page as served.
 * `changed` tells, once the page is served, whether it had the refresh to change.
 */
export async function holdNoScriptRefresh(page: Page, url: string): Promise<{ changed: Promise<boolean> }> {
  let served!: (changed: boolean) => void
  const changed = new Promise<boolean>((resolve) => (served = resolve))
  const address = new URL(url)
  await page.route(url, async (route) => {
    try {
      // Fetched from here, where only the browser knows the short domain's name: by address, with its Host.
      const response = await route.fetch({
        url: url.replace(address.hostname, '127.0.0.1'),
        headers: { ...route.request().headers(), host: address.host },
      })
      const body = await response.text()
      const held = body.replace(/(<meta http-equiv="refresh" content=")1;/, '$13600;')
      served(held !== body)
      await route.fulfill({ response, body: held })
    } catch (error) {
      served(false)
      await route.continue()
      throw error
    }
  })
  return { changed }
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true })
  const path = join(SCREENSHOTS, `${name}.png`)
  await page.screenshot({ path })
  return path
}

/**
 * A stand-in for the destination site ("example.test", also as "www.example.test"): a small page that names the
 * path it was opened at; `/to-www/<path>` moves to www.example.test/<path>.
 */
export async function startDestination(t: Teardown): Promise<{ server: FastifyInstance; port: number; visits: string[] }> {
  const server = Fastify()
  const visits: string[] = []
  server.get('/*', async (request, reply) => {
    visits.push(request.url)
    if (request.url === '/favicon.ico') return reply.code(404).send()
    // As many sites do (example.com → www.example.com): a move to another host of the site.
    if (request.url.startsWith('/to-www/')) {
      const port = (server.server.address() as AddressInfo).port
      return reply.redirect(`http://www.example.test:${port}${request.url.slice('/to-www'.length)}`, 301)
    }
    const path = request.url.replace(/[<>&"']/g, '')
    return reply.type('text/html; charset=utf-8').send(`<!doctype html><html><head><meta name="viewport" content="width=device-width">
<title>Destination</title><style>body{font:18px system-ui,sans-serif;margin:0;padding:2rem;background:#e8f5e9;color:#1b5e20}</style></head>
<body><h1 id="destination">Destination page</h1><p>You reached <code>${path}</code> on example.test.</p></body></html>`)
  })
  await server.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => server.close())
  return { server, port: (server.server.address() as AddressInfo).port, visits }
}

/**
 * The real service listening on a loopback port, a workspace that owns go.acme.test, the destination site,
 * and Chromium resolving both names to 127.0.0.1. Links point at `destination.url(path)`.
 */
export async function startVisitorSide(t: Teardown) {
  requireChromium() // before anything else starts, so the file fails at once
  const testApp = await buildTestApp(t)
  const workspace = await acmeWorkspace(testApp)
  await testApp.app.listen({ port: 0, host: '127.0.0.1' })
  const port = (testApp.app.server.address() as AddressInfo).port
  const destination = await startDestination(t)
  const hosts = [SHORT_DOMAIN, 'example.test', 'www.example.test']
  const browser = await launchBrowser(t, hosts)
  return {
    ...testApp,
    ...workspace,
    browser,
    /** The short address of a slug as a browser opens it. */
    short: (slug: string) => `http://${SHORT_DOMAIN}:${port}/${slug}`,
    destination: { ...destination, url: (path: string) => `http://example.test:${destination.port}${path}` },
    open: (options: Parameters<typeof openPage>[2] = {}) => openPage(browser, hosts, options),
  }
}
