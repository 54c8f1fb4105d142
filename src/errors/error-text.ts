/** An error as one line for a person at a terminal (the command line, a failed start): no stack, no object dump. */
export function errorText(error: unknown): string {
  // A failed connection to "localhost" is an AggregateError (one error per address) without a message.
  if (error instanceof AggregateError && !error.message) return error.errors.map(errorText).join('; ')
  if (error instanceof Error) return oneLine(error.message || String((error as NodeJS.ErrnoException).code ?? error.name))
  return oneLine(String(error))
}

export function oneLine(text: string): string {
  return text.trim().replace(/\s*\n\s*/g, ' ')
}

/** A start that cannot go on for a reason its message names (the variable to change): printed alone. */
export class StartError extends Error {}
