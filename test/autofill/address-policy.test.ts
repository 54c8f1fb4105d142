/**
 * Contract section 12: the address policy autofill connects under (src/autofill/address-policy.ts).
 * Only public unicast addresses are allowed; every other range, the IPv6 forms that tunnel to IPv4
 * (6to4, Teredo, NAT64, IPv4-compatible) and IPv4-mapped addresses of refused IPv4 addresses are refused. Pure functions:
 * no network at all.
 */
import t from 'tap'
import { addressRange, allowEveryAddress, isLoopbackAddress, isPublicAddress } from '../../src/autofill/address-policy.js'

/** Refused addresses and the range each is refused as. */
const REFUSED: [address: string, range: string][] = [
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['10.0.0.1', 'private'],
  ['172.16.0.1', 'private'],
  ['192.168.1.1', 'private'],
  ['100.64.0.1', 'carrierGradeNat'],
  ['169.254.169.254', 'linkLocal'], // cloud metadata
  ['169.254.0.1', 'linkLocal'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['255.255.255.255', 'broadcast'],
  ['0.0.0.0', 'unspecified'],
  ['240.0.0.1', 'reserved'],
  ['192.0.2.1', 'reserved'], // TEST-NET-1
  ['198.18.0.1', 'reserved'], // benchmarking
  ['::1', 'loopback'],
  ['::', 'unspecified'],
  ['fe80::1', 'linkLocal'],
  ['fe80::1%eth0', 'linkLocal'], // with a zone id
  ['2606:4700:4700::1111%eth0', 'linkLocal'], // a zone id makes any address link-scoped
  ['fc00::1', 'uniqueLocal'],
  ['fd12::1', 'uniqueLocal'],
  ['ff02::1', 'multicast'],
  ['::ffff:127.0.0.1', 'loopback'], // IPv4-mapped: judged as the IPv4 address it carries
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:169.254.169.254', 'linkLocal'],
  ['::ffff:10.0.0.1', 'private'],
  ['2002:7f00:1::', '6to4'],
  ['64:ff9b::7f00:1', 'rfc6052'], // NAT64
  ['2001::1', 'teredo'],
  ['::7f00:1', 'ipv4Compatible'], // the deprecated ::127.0.0.1, as the URL parser writes it
  ['::808:808', 'ipv4Compatible'], // ::8.8.8.8: a tunnel all the same
  ['2001:db8::1', 'reserved'], // documentation
  ['[::1]', 'loopback'], // as a URL writes it
]

const ALLOWED = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700:4700::1111', '::ffff:8.8.8.8']

const INVALID = ['', 'localhost', '999.1.1.1']

t.test('non-public addresses are refused, each in its range', async (t) => {
  for (const [address, range] of REFUSED) {
    t.equal(addressRange(address), range, `${address} is ${range}`)
    t.equal(isPublicAddress(address), false, `${address} is refused`)
  }
})

t.test('public unicast addresses are allowed', async (t) => {
  for (const address of ALLOWED) {
    t.equal(addressRange(address), 'unicast', `${address} is unicast`)
    t.equal(isPublicAddress(address), true, `${address} is allowed`)
  }
})

t.test('strings that are not IP addresses are not public', async (t) => {
  for (const value of INVALID) {
    t.equal(addressRange(value), 'invalid', `${JSON.stringify(value)} is invalid`)
    t.equal(isPublicAddress(value), false, `${JSON.stringify(value)} is refused`)
  }
})

t.test('isLoopbackAddress accepts loopback only, in any spelling', async (t) => {
  const loopback = ['127.0.0.1', '127.255.255.254', '::1', '[::1]', '::ffff:127.0.0.1', '::ffff:7f00:1']
  const other = ['10.0.0.1', '169.254.169.254', '0.0.0.0', '::', 'fe80::1%eth0', '8.8.8.8', ...INVALID]
  for (const address of loopback) t.equal(isLoopbackAddress(address), true, `${address} is loopback`)
  for (const address of other) t.equal(isLoopbackAddress(address), false, `${JSON.stringify(address)} is not loopback`)
})

t.test('allowEveryAddress allows anything, even what is no address', async (t) => {
  for (const address of [...REFUSED.map(([address]) => address), ...ALLOWED, ...INVALID]) {
    t.equal(allowEveryAddress(address), true, `${JSON.stringify(address)} is allowed`)
  }
})
