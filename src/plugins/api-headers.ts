/**
 * Every API answer holds a workspace's data, for its token: no cache keeps it (the token travels in
 * Api-Authorization, which shared caches do not know for a credential, RFC 9111 section 3.5), and no browser
 * reads it as another type than it says. A route with a cache policy of its own (the QR codes) sets it over this.
 * Set by the app's first request hook (src/app.ts), and for the answers given before any hook runs (http-server.ts).
 */
export const API_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }
