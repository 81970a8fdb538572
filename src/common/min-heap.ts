/**
 * A binary min-heap by a number of each item (an instant, for the timers that fire the earliest first). With `placed`,
 * each item is told its index whenever it moves, so that it can be taken out from the middle (`remove`).
 */
export class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(
    private readonly keyOf: (item: T) => number,
    private readonly placed: (item: T, index: number) => void = () => undefined,
  ) {}

  get size(): number {
    return this.items.length;
  }

  /** The item with the smallest key; undefined when empty. */
  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    this.items.push(item);
    this.up(this.items.length - 1);
  }

  pop(): T | undefined {
    if (this.items.length === 0) return undefined;
    const top = this.items[0];
    this.remove(0);
    return top;
  }

  /** Takes out the item at `index` (as last told to `placed`). */
  remove(index: number): void {
    const items = this.items;
    const last = items.pop()!;
    if (index === items.length) return;
    items[index] = last;
    this.placed(last, index);
    this.up(this.down(index));
  }

  /** Replaces every item at once: a heap of items sorted by key is already in order. */
  replace(items: Iterable<T>): void {
    this.items.length = 0;
    for (const item of items) this.items.push(item);
    this.items.sort((a, b) => this.keyOf(a) - this.keyOf(b));
    this.items.forEach((item, index) => this.placed(item, index));
  }

  clear(): void {
    this.items.length = 0;
  }

  private up(index: number): void {
    const items = this.items;
    const item = items[index];
    const key = this.keyOf(item);
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (this.keyOf(items[parent]) <= key) break;
      items[index] = items[parent];
      this.placed(items[index], index);
      index = parent;
    }
    items[index] = item;
    this.placed(item, index);
  }

  /** Answers where the item ended. */
  private down(index: number): number {
    const items = this.items;
    const item = items[index];
    const key = this.keyOf(item);
    for (;;) {
      const left = 2 * index + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && this.keyOf(items[right]) < this.keyOf(items[left]) ? right : left;
      if (this.keyOf(items[child]) >= key) break;
      items[index] = items[child];
      this.placed(items[index], index);
      index = child;
    }
    items[index] = item;
    this.placed(item, index);
    return index;
  }
}
