/**
 * The password form in a real browser, end to end: a wrong password (401 and the message), the right one
 * (the destination), and the cookie that spares the form on the next visit.
 */
import t from 'tap'
import { screenshot, startVisitorSide, DESKTOP } from './browser.js'

const side = await startVisitorSide(t)
await side.link({ id: 'secret', url: side.destination.url('/secret?from=form'), passwordProtect: { enable: true, password: 'open sesame' } })
// The destination moves the visitor to another host of its site, as many do: a redirect after the POST's own.
await side.link({ id: 'moved-secret', url: side.destination.url('/to-www/landing'), passwordProtect: { enable: true, password: 'open sesame' } })
await side.link({ id: 'masked-secret', url: side.destination.url('/masked'), masking: true, passwordProtect: { enable: true, password: 'open sesame' } })

t.test('wrong password: 401 and the message; right password: the destination; then the cookie skips the form', async (t) => {
  const visit = await side.open()
  const { page } = visit
  const first = await page.goto(side.short('secret'))
  t.equal(first?.status(), 200)
  t.equal(await page.title(), 'Password required')
  await screenshot(page, 'password-phone')

  await page.fill('input[name=password]', 'wrong guess')
  const [wrong] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')])
  t.equal(wrong?.status(), 401)
  t.equal(wrong?.request().method(), 'POST')
  t.equal(await page.textContent('[role=alert]'), 'That password is not right. Try again.')
  await screenshot(page, 'password-wrong-phone')

  await page.fill('input[name=password]', 'open sesame')
  await Promise.all([page.waitForURL(side.destination.url('/secret?from=form'), { timeout: 10_000 }), page.click('button[type=submit]')])
  t.equal(await page.textContent('#destination'), 'Destination page')

  const [cookie] = await visit.context.cookies(side.short('secret'))
  t.match(cookie, { name: /^sl_access_\d+$/, httpOnly: true, sameSite: 'Lax', path: '/' })

  const again = await page.goto(side.short('secret'))
  t.equal(page.url(), side.destination.url('/secret?from=form'), 'straight to the destination, no form')
  t.equal(again?.request().redirectedFrom()?.url(), side.short('secret'))
  // The same link spelt otherwise (slugs match in any case, and percent-encoded): the browser sends the cookie.
  for (const spelling of ['SECRET', '%53ecret']) {
    await page.goto(side.short(spelling))
    t.equal(page.url(), side.destination.url('/secret?from=form'), `${spelling}: no form`)
  }
  t.same(visit.thirdParty, [])
  t.same(visit.dialogs, [])
  t.same(visit.console.filter((line) => /Content Security Policy/.test(line)), [], 'no CSP violation')
  await visit.context.close()
})

t.test('right password of a link whose destination redirects to another host: the visitor gets there', async (t) => {
  const visit = await side.open()
  const { page } = visit
  await page.goto(side.short('moved-secret'))
  await page.fill('input[name=password]', 'open sesame')
  const landing = `http://www.example.test:${new URL(side.destination.url('/')).port}/landing`
  await Promise.all([page.waitForURL(landing, { timeout: 10_000 }), page.click('button[type=submit]')])
  t.equal(await page.textContent('#destination'), 'Destination page')
  t.same(visit.console.filter((line) => /Content Security Policy/.test(line)), [], 'no CSP violation')
  await visit.context.close()
})

t.test('a masked link: after the right password the short address shows the frame, and a reload posts nothing', async (t) => {
  const visit = await side.open()
  const { page } = visit
  await page.goto(side.short('masked-secret'))
  await page.fill('input[name=password]', 'open sesame')
  const [shown] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')])
  t.equal(shown?.status(), 200)
  t.equal(shown?.request().method(), 'GET', 'the page is the answer of a GET')
  t.equal(shown?.request().redirectedFrom()?.method(), 'POST', 'that the form post was redirected to')
  t.equal(page.url(), side.short('masked-secret'), 'the address bar shows the short address')
  const frame = page.frameLocator('iframe')
  t.equal(await frame.locator('#destination').textContent(), 'Destination page', 'the destination in the frame')
  const reloaded = await page.reload()
  t.equal(reloaded?.request().method(), 'GET', 'a reload asks again with GET, not the form')
  t.equal(reloaded?.status(), 200)
  t.same(visit.dialogs, [])
  t.same(visit.console.filter((line) => /Content Security Policy/.test(line)), [], 'no CSP violation')
  await visit.context.close()
})

t.test('the form on a desktop screen', async (t) => {
  const visit = await side.open({ viewport: DESKTOP })
  await visit.page.goto(side.short('secret'))
  t.equal(await visit.page.isVisible('input[name=password]'), true)
  await screenshot(visit.page, 'password-desktop')
  await visit.context.close()
})
