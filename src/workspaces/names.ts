import { fieldError } from '../errors/app-error.js'

/**
 * Control characters (C0, DEL, C1): a name is one line of text, shown in lists, tab-separated command-line output and
 * terminals, where a tab, a line break or an escape sequence would garble it. NUL PostgreSQL text cannot hold at all.
 */
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/

/** Why a (trimmed) folder or script name cannot be stored; undefined when it can. */
export function nameProblem(trimmed: string): string | undefined {
  if (!trimmed) return 'must not be blank'
  if (CONTROL_CHARACTERS.test(trimmed)) return 'must not contain control characters (a line break, a tab)'
  return undefined
}

/** The name as stored: trimmed; a 400 naming `path` when it cannot be. */
export function cleanName(name: string, path: string): string {
  const clean = name.trim()
  const problem = nameProblem(clean)
  if (problem) throw fieldError(path, problem)
  return clean
}
