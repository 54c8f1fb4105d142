import { storeVisits, type StoredVisit } from '../../src/analytics/visit-store.js'
import { openTestDatabase } from '../../test/support/test-app.js'
const teardowns: (() => unknown)[] = []
const { database } = await openTestDatabase({ teardown: (fn) => teardowns.unshift(fn) })
const orig = database.transaction.bind(database)
const times: Record<string, number> = {}
database.transaction = (work) => orig((query) => work(async (sql, params) => {
  const t = performance.now(); const r = await query(sql, params); const k = sql.trim().slice(0, 40).replace(/\s+/g,' '); times[k] = (times[k] ?? 0) + performance.now() - t; return r as never }))
let cold = 1001
const base = Date.now()
for (let s = 0; s < 12; s++) {
  const batch: StoredVisit[] = []
  for (let i = 0; i < 15000; i++) {
    const link = i % 10 === 0 ? (cold = cold >= 10000 ? 1001 : cold + 1) : 1 + Math.floor(Math.random() * 1000)
    batch.push({ at: new Date(base + s * 1000 + i / 15), linkUniq: link, workspaceId: 1, domain: 'go.bench.test', country: null, referrerHost: null, device: 'desktop', os: 'Windows', browser: 'Chrome', destination: 'https://example.com/landing/' + link, reason: 'default', answer: 'redirect', bot: false, visitor: '123456789' })
  }
  const t = performance.now()
  await storeVisits(database, batch)
  if (s === 1) for (const k of Object.keys(times)) times[k] = 0
  if (s >= 2) console.log('batch', s, (performance.now() - t).toFixed(0), 'ms')
}
for (const [k, v] of Object.entries(times)) console.log((v / 10).toFixed(1).padStart(8), 'ms/batch', k)
for (const fn of teardowns) await fn()
