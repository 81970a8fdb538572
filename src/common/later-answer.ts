/** Told once, when a LaterAnswer settles; an object, so a parked request needs no closure for it. */
export interface LaterListener<T> {
  answered(value: T): void;
  failed(error: unknown): void;
}

/**
 * The answer of a route that parks (a long poll), given later. A route that returns one ends its async call chain
 * while it waits: a parked request holds this and the record that will settle it, not a suspended frame for each
 * function between the router and the wait (about 500 bytes each). Not a thenable, on purpose: awaiting it would hold
 * the frame again. The fast path writes it when it settles; the router's path turns it into a promise
 * (NoContentWhenEmptyInterceptor), and `promise()` does for callers in the broker.
 */
export class LaterAnswer<T> {
  private listener: LaterListener<T> | undefined = undefined;
  private settled: { value: T } | { error: unknown } | undefined = undefined;

  answer(value: T): void {
    this.settle({ value });
  }

  fail(error: unknown): void {
    this.settle({ error });
  }

  /** One listener; told at once when the answer is already there. */
  listen(listener: LaterListener<T>): void {
    if (this.listener) throw new Error('a LaterAnswer has one listener');
    this.listener = listener;
    if (this.settled) this.tell();
  }

  promise(): Promise<T> {
    return new Promise<T>((resolve, reject) => this.listen({ answered: resolve, failed: reject }));
  }

  private settle(outcome: { value: T } | { error: unknown }): void {
    if (this.settled) return;
    this.settled = outcome;
    if (this.listener) this.tell();
  }

  private tell(): void {
    const outcome = this.settled!;
    const listener = this.listener!;
    this.listener = undefined;
    if ('error' in outcome) listener.failed(outcome.error);
    else listener.answered(outcome.value);
  }
}

/** A route's answer, now or later, as a promise. */
export function whenAnswered<T>(answer: T | LaterAnswer<T>): Promise<T> {
  return answer instanceof LaterAnswer ? answer.promise() : Promise.resolve(answer);
}
