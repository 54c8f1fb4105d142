/**
 * The client's address in one spelling whatever the listening socket's family: an IPv4 client is `::ffff:1.2.3.4`
 * to a listener on `::` and `1.2.3.4` to one on `0.0.0.0` (or in X-Forwarded-For, as proxies write it). What counts
 * per address across instances (bad tokens, password tries, unique visitors) must count such a client once.
 */
import type { FastifyRequest } from 'fastify'
import { isIP, isIPv4 } from 'node:net'

const MAPPED = '::ffff:'

export function clientAddress(request: FastifyRequest): string {
  let address = request.ip
  const peer = request.socket?.remoteAddress
  if (address !== peer && peer !== undefined && !isIP(address)) {
    // Read from X-Forwarded-For (TRUST_PROXY). Some proxies (Azure's, IIS ARR) write the client's port too: the
    // address is what counts. Anything else that is no address is not taken (every made-up value, of any length,
    // would be a client of its own in every count kept per address): the connection's own address is.
    const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$|^\[([0-9A-Fa-f:.]+(?:%[\w.-]+)?)\](?::\d+)?$/.exec(address)
    const unported = withPort?.[1] ?? withPort?.[2]
    address = unported !== undefined && isIP(unported) ? unported : peer
  }
  if (address.length > MAPPED.length && address.slice(0, MAPPED.length).toLowerCase() === MAPPED) {
    const ipv4 = address.slice(MAPPED.length)
    if (isIPv4(ipv4)) return ipv4
  }
  return address
}
