/**
 * Rows in PostgreSQL's COPY text format: a tab between values, a newline after each row, `\N` for NULL, and a
 * backslash, tab, newline or carriage return inside a value escaped with a backslash (the format's only
 * special characters), so that any text goes through as it is. A row is its fields joined by tabs, then a
 * newline (the visits' rows: src/analytics/visit-store.ts).
 */
const SPECIAL = /[\\\t\n\r]/
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }

/** A text value as a field of a row (NULL as `\N`); a row's fields are joined by tabs. */
export function copyField(text: string | null): string {
  if (text === null) return '\\N'
  return SPECIAL.test(text) ? text.replace(/[\\\t\n\r]/g, (character) => ESCAPES[character]) : text
}
