/** The bound on password checks under way (src/redirects/password-checks.ts), step by step. */
import t from 'tap'
import { PasswordChecks } from '../../src/redirects/password-checks.js'

t.test('at most maxRunning checks run and maxWaiting wait; beyond, busy at once; places pass on in order', async (t) => {
  const checks = new PasswordChecks(2, 1)
  const started: number[] = []
  const finish: (() => void)[] = []
  const check = (n: number) => () =>
    new Promise<number>((resolve) => {
      started.push(n)
      finish[n] = () => resolve(n)
    })
  const first = checks.run(check(0))
  const second = checks.run(check(1))
  const third = checks.run(check(2))
  t.equal(await checks.run(check(3)), 'busy', 'a fourth: two run, one waits')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(started, [0, 1], 'two run')
  finish[1]()
  t.equal(await second, 1)
  await new Promise((resolve) => setImmediate(resolve))
  t.same(started, [0, 1, 2], 'the one waiting takes the place given up')
  finish[0]()
  finish[2]()
  t.same(await Promise.all([first, third]), [0, 2])
  // All done: two may run again, and a check that fails gives its place back too.
  await t.rejects(checks.run(() => Promise.reject(new Error('scrypt failed'))), /scrypt failed/)
  await new Promise((resolve) => setImmediate(resolve))
  t.same(await Promise.all([checks.run(async () => 'a'), checks.run(async () => 'b')]), ['a', 'b'])
})
