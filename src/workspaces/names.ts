import { fieldError } from '../errors/app-error.js'

/** Why a (trimmed) folder or script name cannot be stored; undefined when it can. */
export function nameProblem(trimmed: string): string | undefined {
  if (!trimmed) return 'must not be blank'
  // PostgreSQL text cannot hold NUL: refused here rather than failing in the database.
  if (trimmed.includes('\0')) return 'must not contain NUL characters'
  return undefined
}

/** The name as stored: trimmed; a 400 naming `path` when it cannot be. */
export function cleanName(name: string, path: string): string {
  const clean = name.trim()
  const problem = nameProblem(clean)
  if (problem) throw fieldError(path, problem)
  return clean
}
