/**
 * Checks of different fields of one request, run together so that its 400 names each field they refuse (contract
 * section 5: "Every 400 names each offending field"), where checks run one after another named the first one's
 * fields only.
 */
import { AppError, validationFailed } from './app-error.js'

/**
 * The 400s that name fields: the rules' validation_failed, and the two with codes of their own, redirect_loop and
 * slug_reserved. Alone, each keeps its code; together, they are one validation_failed naming every field.
 */
const FIELD_CODES = new Set(['validation_failed', 'redirect_loop', 'slug_reserved'])
const isFieldProblem = (error: unknown): error is AppError => error instanceof AppError && FIELD_CODES.has(error.code) && error.errors !== undefined

/** One 400 for the field problems `failures` (every one isFieldProblem): the one itself, or all of them merged. */
function mergedFieldProblems(failures: AppError[]): AppError {
  return failures.length === 1 ? failures[0] : validationFailed(failures.flatMap((failure) => failure.errors ?? []))
}

/**
 * The checks' results when all pass. When every check that failed failed with a field problem: one 400 with all
 * their fields, in the order of the checks (see mergedFieldProblems). Otherwise the first failure in that order,
 * alone (another answer, such as a 403 for a reserved domain, is not mixed with field problems).
 */
export async function checkTogether<T extends readonly unknown[]>(...checks: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(checks)
  const failures = settled.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []))
  if (failures.length === 0) return settled.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T
  if (failures.every(isFieldProblem)) throw mergedFieldProblems(failures)
  throw failures[0]
}
