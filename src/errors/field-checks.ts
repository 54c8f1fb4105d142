/**
 * Checks of different fields of one request, run together so that its 400 names each field they refuse (contract
 * section 5: "Every 400 names each offending field"), where checks run one after another named the first one's
 * fields only.
 */
import { AppError, validationFailed } from './app-error.js'

const isValidationFailure = (error: unknown): error is AppError => error instanceof AppError && error.code === 'validation_failed'

/**
 * The checks' results when all pass. When every check that failed failed with validation_failed: one
 * validation_failed with all their fields, in the order of the checks. Otherwise the first failure in that order,
 * alone (another answer, such as a 403 for a reserved domain, is not mixed with field problems).
 */
export async function checkTogether<T extends readonly unknown[]>(...checks: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(checks)
  const failures = settled.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []))
  if (failures.length === 0) return settled.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T
  if (failures.length > 1 && failures.every(isValidationFailure)) throw validationFailed(failures.flatMap((failure) => failure.errors ?? []))
  throw failures[0]
}
