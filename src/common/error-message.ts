/** What a caught value says, for a log line or an answer: its message when it is an Error. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
