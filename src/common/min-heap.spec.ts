import { MinHeap } from './min-heap';

interface Item {
  at: number;
  index: number;
}

function heapOf(): MinHeap<Item> {
  return new MinHeap<Item>(
    (item) => item.at,
    (item, index) => (item.index = index),
  );
}

/** A fixed pseudo-random sequence, so a failure is the same on every run. */
function numbers(count: number, seed = 7): number[] {
  let state = seed;
  return Array.from({ length: count }, () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % 1000;
  });
}

describe('MinHeap', () => {
  it('gives its items back smallest first, ties included', () => {
    const heap = heapOf();
    const keys = numbers(500);
    for (const at of keys) heap.push({ at, index: -1 });

    const out: number[] = [];
    for (let item = heap.pop(); item; item = heap.pop()) out.push(item.at);

    expect(out).toEqual([...keys].sort((a, b) => a - b));
    expect(heap.size).toBe(0);
    expect(heap.pop()).toBeUndefined();
  });

  it('takes an item out from anywhere by the index it was told, and keeps the rest in order', () => {
    const heap = heapOf();
    const items = numbers(300, 11).map((at) => ({ at, index: -1 }));
    for (const item of items) heap.push(item);
    const removed = new Set(items.filter((_, position) => position % 3 === 0));

    for (const item of removed) heap.remove(item.index);

    const out: number[] = [];
    for (let item = heap.pop(); item; item = heap.pop()) out.push(item.at);
    const kept = items.filter((item) => !removed.has(item)).map((item) => item.at);
    expect(out).toEqual(kept.sort((a, b) => a - b));
  });

  it('is replaced whole from items in any order', () => {
    const heap = heapOf();
    heap.push({ at: 1, index: -1 });
    heap.replace([5, 3, 9, 1].map((at) => ({ at, index: -1 })));

    expect([heap.pop()?.at, heap.pop()?.at, heap.pop()?.at, heap.pop()?.at, heap.pop()]).toEqual([
      1,
      3,
      5,
      9,
      undefined,
    ]);
  });
});
