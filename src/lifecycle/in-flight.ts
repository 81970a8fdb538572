const PREVIOUS = Symbol('leasehold:in-flight-previous');
const NEXT = Symbol('leasehold:in-flight-next');

type Linked = object & { [PREVIOUS]?: Linked | null; [NEXT]?: Linked | null };

/**
 * Requests not yet answered, linked through themselves. A Set of them had every request promoted out of the young
 * generation (the hash tables it outgrew, already old, still pointed at them): 6 KB a renewal, scavenges then took a
 * tenth of the broker's time at 50 connections (bench/RESULTS.md). A removed entry keeps no pointer to another; an
 * item is in one list at a time.
 */
export class InFlight<T extends object> implements Iterable<T> {
  private head: Linked | null = null;
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(item: T): void {
    const linked = item as Linked;
    if (linked[PREVIOUS] !== undefined) return;
    linked[PREVIOUS] = null;
    linked[NEXT] = this.head;
    if (this.head) this.head[PREVIOUS] = linked;
    this.head = linked;
    this.count += 1;
  }

  delete(item: T): boolean {
    const linked = item as Linked;
    const previous = linked[PREVIOUS];
    if (previous === undefined) return false;
    const next = linked[NEXT] ?? null;
    if (previous) previous[NEXT] = next;
    else this.head = next;
    if (next) next[PREVIOUS] = previous;
    linked[PREVIOUS] = undefined;
    linked[NEXT] = undefined;
    this.count -= 1;
    return true;
  }

  *[Symbol.iterator](): Iterator<T> {
    for (let linked = this.head; linked; linked = linked[NEXT] ?? null) yield linked as T;
  }
}
