/**
 * The app's log at `error` level, kept in memory: the app logs every 5xx there, so a test that provokes
 * none can assert the list stays empty (`errorLines()`), and a failure shows the logged error itself.
 */
export function errorLog() {
  const lines: Record<string, unknown>[] = []
  return {
    logger: { level: 'error', stream: { write: (line: string) => lines.push(JSON.parse(line)) } },
    errorLines: () => lines.filter((line) => typeof line.level === 'number' && line.level >= 50),
  }
}
