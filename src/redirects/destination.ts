/**
 * Where a visit goes (contract section 11, step 5): the visitor's country picks a geolocation rule, else the
 * rotator draws among its entries and the link's own url, else the url; the visit's query string follows.
 */

/** A destination with the form that can go into a Location header (see headerSafeUrl). */
export interface Target {
  url: string
  location: string
}

export interface RotatorTarget extends Target {
  weight: number
}

export interface DestinationRules {
  target: Target
  /** Country code (upper case) → target; the codes of a link are unique, so the first rule is the only one. */
  geolocations: Map<string, Target>
  rotator: RotatorTarget[]
}

/**
 * The visitor's country from the COUNTRY_HEADER value: an ISO 3166-1 alpha-2 code, else null. Cloudflare's
 * `XX` (unknown) and `T1` (Tor) name no country; a repeated header is ambiguous and names none either.
 */
export function visitorCountry(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string') return null
  const code = header.trim().toUpperCase()
  return /^[A-Z]{2}$/.test(code) && code !== 'XX' && code !== 'T1' ? code : null
}

/**
 * Step 5: the geolocation rule of the visitor's country; else a weighted draw among the rotator entries and the
 * link's url, which gets the remaining percent (weights add up to at most 100); else the url. `random` is in [0, 1).
 */
export function chooseDestination(rules: DestinationRules, country: string | null, random: () => number): Target {
  if (country !== null) {
    const rule = rules.geolocations.get(country)
    if (rule) return rule
  }
  if (rules.rotator.length > 0) {
    let point = random() * 100
    for (const entry of rules.rotator) {
      point -= entry.weight
      if (point < 0) return entry
    }
  }
  return rules.target
}

/** How a visit's destination was chosen (analytics report it). */
export type DestinationReason = 'default' | 'geolocation' | 'rotator'

/** Which rule chooseDestination followed to give `chosen` (rules and targets are distinct objects). */
export function destinationReason(rules: DestinationRules, country: string | null, chosen: Target): DestinationReason {
  if (chosen === rules.target) return 'default'
  return country !== null && rules.geolocations.get(country) === chosen ? 'geolocation' : 'rotator'
}

/**
 * A URL as it may go into a Location header, a URI reference (RFC 9110, 10.2.2): stored URLs can hold characters
 * a header cannot (non-ASCII) and ASCII ones a URI cannot (`"<>\\^`{|}`, which the API takes as browsers do). Such
 * a URL is written the way a browser would send it (WHATWG serialisation: punycode host, UTF-8 percent-encoding),
 * and what that leaves of those characters is percent-encoded too, as the pages' links are, but in the fragment,
 * which keeps what browsers keep there. A URL of URI characters only is kept exactly as stored.
 */
export function headerSafeUrl(url: string): string {
  if (URI_CHARACTERS.test(url)) return url
  let serialised: string
  try {
    serialised = new URL(url).href
  } catch {
    serialised = url
  }
  const hashAt = serialised.indexOf('#')
  if (hashAt === -1) return encodeBytes(serialised)
  return `${encodeBytes(serialised.slice(0, hashAt))}#${encodeBytes(serialised.slice(hashAt + 1), NOT_FRAGMENT_CHARACTER)}`
}

/** RFC 3986's characters: unreserved, reserved and `%` (of the escapes, kept as they are). */
const URI_CHARACTERS = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]*$/
/** What encodeBytes escapes: anything but those, and `#` too (it would start a fragment). */
const NOT_URI_CHARACTER = /[^A-Za-z0-9\-._~:/?[\]@!$&'()*+,;=%]/g
/**
 * In a fragment, only what browsers escape there (WHATWG's fragment percent-encode set: controls, white space,
 * `"<>` and a backquote, and non-ASCII): a page's script reads the fragment as the link holds it (a `#` or `{}`
 * of a hash router's path included).
 */
const NOT_FRAGMENT_CHARACTER = /[^\x21\x23-\x3b\x3d\x3f-\x5f\x61-\x7e]/g

/** Request targets are read as latin1 by Node: each character is one byte, percent-encoded as such. */
function encodeBytes(text: string, escaped = NOT_URI_CHARACTER): string {
  return text.replace(escaped, (character) => {
    const code = character.charCodeAt(0)
    return code < 256 ? `%${code.toString(16).toUpperCase().padStart(2, '0')}` : encodeURIComponent(character)
  })
}

function parameterName(pair: string): string {
  const equals = pair.indexOf('=')
  const raw = equals === -1 ? pair : pair.slice(0, equals)
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '))
  } catch {
    return raw
  }
}

/**
 * The destination with the visit's query string appended (`query` is the raw text after `?`): each parameter
 * the destination does not set already is added as the visitor sent it; one it sets keeps the destination's
 * value. The destination's own text is left as stored, and a fragment stays last.
 */
export function appendVisitQuery(destination: string, query: string): string {
  if (query === '') return destination
  const hashAt = destination.indexOf('#')
  const base = hashAt === -1 ? destination : destination.slice(0, hashAt)
  const fragment = hashAt === -1 ? '' : destination.slice(hashAt)
  const queryAt = base.indexOf('?')
  const taken = new Set<string>()
  if (queryAt !== -1) {
    for (const pair of base.slice(queryAt + 1).split('&')) if (pair !== '') taken.add(parameterName(pair))
  }
  const added: string[] = []
  for (const pair of query.split('&')) {
    if (pair !== '' && !taken.has(parameterName(pair))) added.push(encodeBytes(pair))
  }
  if (added.length === 0) return destination
  const separator = queryAt === -1 ? '?' : base.endsWith('?') || base.endsWith('&') ? '' : '&'
  return base + separator + added.join('&') + fragment
}
