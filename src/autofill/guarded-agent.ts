/**
 * The one undici dispatcher every autofill request goes through, each redirect hop included. It checks
 * addresses where the connection is made, so no hostname trick gets past it:
 *
 * - a literal IP host (undici does not call `lookup` for those) is checked before connecting;
 * - a hostname is resolved by our `lookup`, which passes on only the allowed addresses, and the socket
 *   connects to one of exactly those (no second resolution, so no DNS-rebinding window);
 * - once connected, the socket's remote address is checked again, as a last guard.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns'
import { isIP, type Socket } from 'node:net'
import { Agent, buildConnector } from 'undici'
import { addressRange, type AddressPolicy } from './address-policy.js'

/** Node's dns.lookup signature, as net.connect calls it. */
export type LookupFunction = (
  hostname: string,
  options: LookupOneOptions | LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
) => void

export class BlockedAddressError extends Error {
  override name = 'BlockedAddressError'
  readonly code = 'ERR_AUTOFILL_BLOCKED_ADDRESS'
  constructor(host: string, address: string) {
    super(`refused to connect to ${host === address ? address : `${host} (${address})`}: ${addressRange(address)} address`)
  }
}

export interface GuardedAgentOptions {
  allowAddress: AddressPolicy
  /** How host names are resolved (tests inject one); default dns.lookup. */
  lookup?: LookupFunction
  connectTimeoutMs: number
}

const unbracket = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host)

/** dns.lookup, keeping only the addresses the policy allows; an error when none is left. */
function guardedLookup(allowAddress: AddressPolicy, resolve: LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '')
      const all = addresses as LookupAddress[]
      const allowed = all.filter((entry) => allowAddress(entry.address))
      if (allowed.length === 0) {
        return callback(new BlockedAddressError(hostname, all[0]?.address ?? 'no address'), '')
      }
      if (options.all) return callback(null, allowed)
      callback(null, allowed[0].address, allowed[0].family)
    })
  }
}

export function createGuardedAgent(options: GuardedAgentOptions): Agent {
  const { allowAddress } = options
  const connectSocket = buildConnector({
    timeout: options.connectTimeoutMs,
    lookup: guardedLookup(allowAddress, options.lookup ?? (dnsLookup as unknown as LookupFunction)),
  } as buildConnector.BuildOptions)

  const connect: buildConnector.connector = (connectOptions, callback) => {
    const host = unbracket(connectOptions.hostname)
    if (isIP(host) && !allowAddress(host)) {
      callback(new BlockedAddressError(host, host), null)
      return
    }
    connectSocket(connectOptions, (error, socket) => {
      if (error || !socket) return callback(error ?? new Error('no socket'), null)
      const remote = (socket as Socket).remoteAddress
      if (!remote || !allowAddress(remote)) {
        socket.destroy()
        return callback(new BlockedAddressError(host, remote ?? 'unknown'), null)
      }
      callback(null, socket)
    })
  }

  return new Agent({
    connect,
    // No keep-alive (undici's pipelining 0): every request opens a connection of its own, checked as it is
    // made; page fetches are one-offs to many sites, so there is little to reuse anyway.
    pipelining: 0,
    connections: 16,
  })
}
