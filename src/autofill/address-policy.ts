/**
 * Which addresses autofill may connect to (contract section 12): public unicast only. Loopback, private,
 * carrier-grade NAT, link-local (cloud metadata at 169.254.169.254), multicast, broadcast, unspecified and
 * reserved ranges are refused, and so are the IPv6 forms that tunnel to other IPv4 addresses (6to4,
 * Teredo, NAT64, IPv4-compatible), whose real destination cannot be checked here. An IPv4-mapped IPv6
 * address is judged as the IPv4 address it carries.
 */
import ipaddr from 'ipaddr.js'

/** Decides whether a connection to this IP address (v4 or v6, without brackets) may be made. */
export type AddressPolicy = (address: string) => boolean

/** The range ipaddr.js puts an address in ('unicast' is the one public range), or 'invalid'. */
export function addressRange(address: string): string {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address
  // Zone ids (fe80::1%eth0) are link-local by construction.
  if (bare.includes('%')) return 'linkLocal'
  if (!ipaddr.isValid(bare)) return 'invalid'
  let parsed = ipaddr.parse(bare)
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6
    if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address()
    // The deprecated IPv4-compatible form (::a.b.c.d) tunnels too; ipaddr.js calls it unicast.
    else if (v6.parts.slice(0, 6).every((part) => part === 0) && v6.range() === 'unicast') return 'ipv4Compatible'
  }
  return parsed.range()
}

export const isPublicAddress: AddressPolicy = (address) => addressRange(address) === 'unicast'

export const allowEveryAddress: AddressPolicy = () => true

export const isLoopbackAddress: AddressPolicy = (address) => addressRange(address) === 'loopback'
