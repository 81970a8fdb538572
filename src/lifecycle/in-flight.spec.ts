import { InFlight } from './in-flight';

const items = (count: number) => Array.from({ length: count }, (_unused, id) => ({ id }));

describe('InFlight', () => {
  it('counts and lists what was added and not yet deleted, whichever order they leave in', () => {
    const list = new InFlight<{ id: number }>();
    const [a, b, c, d] = items(4);
    [a, b, c, d].forEach((item) => list.add(item));

    expect(list.delete(b)).toBe(true);
    expect(list.delete(d)).toBe(true);
    expect(list.size).toBe(2);
    expect([...list].map((item) => item.id).sort()).toEqual([0, 2]);
    expect(list.delete(a)).toBe(true);
    expect(list.delete(c)).toBe(true);
    expect(list.size).toBe(0);
    expect([...list]).toEqual([]);
  });

  it('ignores a second add and a second delete of the same item', () => {
    const list = new InFlight<{ id: number }>();
    const [a, b] = items(2);
    list.add(a);
    list.add(b);
    list.add(a);

    expect(list.size).toBe(2);
    expect(list.delete(a)).toBe(true);
    expect(list.delete(a)).toBe(false);
    expect(list.delete({ id: 9 })).toBe(false);
    expect([...list]).toEqual([b]);
  });

  it('leaves a deleted item pointing at no other item, so a dead one cannot keep the living in memory', () => {
    const list = new InFlight<{ id: number }>();
    const all = items(5);
    all.forEach((item) => list.add(item));

    for (const item of [all[2], all[0], all[4]]) {
      list.delete(item);
      const pointers = Object.getOwnPropertySymbols(item).map((key) => (item as Record<symbol, unknown>)[key]);
      expect(pointers.every((value) => value === undefined)).toBe(true);
    }
    expect([...list].map((item) => item.id).sort()).toEqual([1, 3]);
  });

  it('takes items back after they left', () => {
    const list = new InFlight<{ id: number }>();
    const [a] = items(1);
    list.add(a);
    list.delete(a);
    list.add(a);

    expect(list.size).toBe(1);
    expect([...list]).toEqual([a]);
  });
});
