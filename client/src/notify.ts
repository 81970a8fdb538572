// For callbacks the caller supplies: a bug in one (a logger, say) must not stop the work
// that calls it.
export function notify(callback: () => void): void {
  try {
    callback();
  } catch {
    return;
  }
}
