import pg from 'pg'
import { buildTestApp, client, createWorkspaceToken } from './test/support/test-app.js'
const teardowns: any[] = []
const t = { teardown: (fn: any) => teardowns.push(fn) }
const { app, prisma, database } = await buildTestApp(t)
const token = await createWorkspaceToken(prisma, { workspace: 'w', defaultDomain: 'go.w.test' })
const api = client(app, token)
const link = (await api.create({ url: 'https://example.com/', pixels: [{ platform: 'ga', value: '1' }] }, { autofill: false })).json()
const admin = new pg.Client({ connectionString: process.env.DATABASE_URL }); await admin.connect()
const db = (await prisma.$queryRawUnsafe<any[]>('select current_database() as d'))[0].d
await admin.query(`ALTER DATABASE "${db}" SET log_statement = 'all'`)
// new connections pick it up: close pool idle? force by pg_terminate
await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [db])
await new Promise((r) => setTimeout(r, 200))
await api.update(link.uniq, { title: 'warm' }, { autofill: false }).catch(() => {})
console.log('MARK-TITLE', new Date().toISOString())
const r1 = await api.update(link.uniq, { title: 'x' }, { autofill: false })
console.log('MARK-PIXELS', r1.statusCode)
const r2 = await api.update(link.uniq, { pixels: [{ platform: 'ga', value: '2' }] }, { autofill: false })
console.log('MARK-CREATE', r2.statusCode)
const r3 = await api.create({ url: 'https://example.com/2' }, { autofill: false })
console.log('MARK-END', r3.statusCode)
await admin.query(`ALTER DATABASE "${db}" RESET log_statement`); await admin.end()
for (const fn of teardowns.reverse()) await fn()
