import { TenantRotation } from './tenant-rotation';

describe('TenantRotation', () => {
  it('hands out windows of its size in turn, wrapping round', () => {
    const rotation = new TenantRotation(['a', 'b', 'c', 'd', 'e'], 2);

    expect([rotation.window(), rotation.window(), rotation.window(), rotation.window()]).toEqual([
      ['a', 'b'],
      ['c', 'd'],
      ['e'],
      ['a', 'b'],
    ]);
  });

  it('drops the tenants a claim that was not full found nothing of, and goes on after the window', () => {
    const rotation = new TenantRotation(['a', 'b', 'c', 'd', 'e'], 2);
    const first = rotation.window();

    rotation.claimed(first, ['b'], false);

    expect([rotation.window(), rotation.window(), rotation.window()]).toEqual([['c', 'd'], ['e'], ['b', 'c']]);
  });

  it('keeps every tenant of a full claim: older work of others may have passed them over', () => {
    const rotation = new TenantRotation(['a', 'b', 'c'], 3);
    const window = rotation.window();

    rotation.claimed(window, ['a'], true);

    expect(rotation.done).toBe(false);
    expect(rotation.window()).toEqual(['a', 'b', 'c']);
  });

  it('is done once every tenant is dropped', () => {
    const rotation = new TenantRotation(['a', 'b'], 5);

    rotation.claimed(rotation.window(), [], false);

    expect(rotation.done).toBe(true);
    expect(new TenantRotation([], 5).done).toBe(true);
  });
});
