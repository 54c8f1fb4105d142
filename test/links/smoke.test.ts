import t from 'tap'
import { buildTestApp, client, createWorkspaceToken } from '../support/test-app.js'

t.test('create answers 201 with the flat record', async (t) => {
  const { app, prisma } = await buildTestApp(t)
  const token = await createWorkspaceToken(prisma, { workspace: 'acme', defaultDomain: 'go.acme.test' })
  const response = await client(app, token).create({ url: 'https://example.com/', id: 'Summer' })
  t.equal(response.statusCode, 201)
  t.match(response.json(), { id: 'Summer', domain: 'go.acme.test', shortUrl: 'https://go.acme.test/Summer' })
})
