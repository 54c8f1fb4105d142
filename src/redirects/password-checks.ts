/**
 * Bounds the password checks under way. scrypt (src/links/password.ts) takes about 90 ms and 32 MiB on one of
 * libuv's four threads, which DNS lookups (autofill) and file reads share. The try limit counts per link and
 * address, so wrong passwords sent from many addresses at once would otherwise queue without bound, every visitor
 * with the right password behind them. At most `maxRunning` checks run and `maxWaiting` wait; a try beyond is
 * answered at once, 503 with Retry-After, rather than after a wait of seconds.
 */
import { Slots } from '../concurrency/slots.js'

export class PasswordChecks extends Slots {
  constructor(maxRunning = 2, maxWaiting = 32) {
    super(maxRunning, maxWaiting)
  }
}
