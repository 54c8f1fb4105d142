/** A client for the management routes (reads, deletes, folders, pixels, scripts) beside test-app.ts's. */
import type { FastifyInstance } from 'fastify'

/** Requests of every method with a token; bodies as JSON, the way API clients send them. */
export function apiClient(app: FastifyInstance, token: string) {
  const headers = { 'api-authorization': token }
  const withBody = (method: 'POST' | 'PUT') => (url: string, body: unknown) =>
    app.inject({
      method,
      url,
      headers: { ...headers, 'content-type': 'application/json' },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    })
  return {
    get: (url: string) => app.inject({ method: 'GET', url, headers }),
    delete: (url: string) => app.inject({ method: 'DELETE', url, headers }),
    post: withBody('POST'),
    put: withBody('PUT'),
    /** Creates a link and answers its record; throws on anything but 201. */
    async link(link: Record<string, unknown>) {
      const response = await withBody('POST')('/v1/links/create', { link, autofill: false })
      if (response.statusCode !== 201) throw new Error(`create answered ${response.statusCode}: ${response.body}`)
      return response.json()
    },
  }
}
