/**
 * Writes the OpenAPI document the app serves to schemas/openapi.snapshot.json (`npm run openapi:snapshot`).
 * test/openapi/openapi.test.ts fails when the served document drifts from that file, so every change to the
 * API's schemas shows up in review as a change to the snapshot.
 */
import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { buildApp } from '../../src/app.js'
import { openDatabase } from '../../src/db/database.js'
import { testConfig } from './test-app.js'

const snapshotPath = fileURLToPath(new URL('../../schemas/openapi.snapshot.json', import.meta.url))

// The document does not depend on the data: an in-memory database is enough.
const database = await openDatabase({ dataDir: 'memory://' })
const app = await buildApp({ config: testConfig(), database, logger: false })
try {
  const response = await app.inject({ method: 'GET', url: '/openapi.json' })
  if (response.statusCode !== 200) throw new Error(`GET /openapi.json answered ${response.statusCode}`)
  // Two-space indentation and a trailing newline, as test/openapi/openapi.test.ts compares it.
  await writeFile(snapshotPath, `${JSON.stringify(response.json(), null, 2)}\n`)
  console.log(`wrote ${snapshotPath}`)
} finally {
  await app.close()
  await database.close()
}
