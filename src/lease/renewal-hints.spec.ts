import { atCeiling, hintHeaders, renewalHints } from './renewal-hints';

const renewed = (remainingSeconds: number, deadlineSeconds?: number) => ({
  renewed: 1,
  earliestExpiresAt: '2026-12-01T10:00:00.000000Z',
  remainingSeconds,
  ...(deadlineSeconds === undefined ? {} : { deadlineSeconds }),
});

describe('renewalHints', () => {
  it.each([
    [0, 20],
    [0.5, 18],
    [0.999, 16.004],
  ])('with a draw of %p asks for the next renewal after %p s of 60 left', (draw, expected) => {
    expect(renewalHints(renewed(60), () => draw).renewAfterSeconds).toBeCloseTo(expected, 6);
  });

  it('names the deadline and keeps the hint while the lease is below its ceiling', () => {
    expect(renewalHints(renewed(30, 90), () => 0)).toEqual({ renewAfterSeconds: 10, deadlineSeconds: 90 });
  });

  it('drops the hint once the lease stands at its ceiling', () => {
    expect(atCeiling(renewed(42.5, 42.5))).toBe(true);
    expect(renewalHints(renewed(42.5, 42.5), () => 0)).toEqual({ deadlineSeconds: 42.5 });
  });

  it('gives a reason, and nothing else, when nothing was renewed', () => {
    const nothing = { renewed: 0, earliestExpiresAt: null };
    expect(renewalHints({ ...nothing, held: true })).toEqual({ status: 'expired' });
    expect(renewalHints({ ...nothing, held: false })).toEqual({ status: 'unknown' });
    expect(renewalHints(nothing)).toEqual({ status: 'unknown' });
  });

  it('asks for another renewal within a quarter second when rows were busy, renewed or not', () => {
    const nothing = { renewed: 0, earliestExpiresAt: null, held: true, busy: true };
    expect(renewalHints(nothing, () => 0)).toEqual({ status: 'busy', renewAfterSeconds: 0.25 });
    expect(renewalHints(nothing, () => 0.999).renewAfterSeconds).toBeCloseTo(0.20005, 6);
    expect(renewalHints({ ...renewed(60), busy: true }, () => 0)).toEqual({ status: 'busy', renewAfterSeconds: 0.25 });
    expect(renewalHints({ ...renewed(0.3), busy: true }, () => 0).renewAfterSeconds).toBeCloseTo(0.1, 9);
  });
});

describe('hintHeaders', () => {
  it('writes seconds to the millisecond and the status as it is', () => {
    expect(hintHeaders({ renewAfterSeconds: 9.87149, deadlineSeconds: 84.12 })).toEqual([
      ['Leasehold-Renew-After', '9.871'],
      ['Leasehold-Deadline-After', '84.120'],
    ]);
    expect(hintHeaders({ status: 'expired' })).toEqual([['Leasehold-Lease-Status', 'expired']]);
    expect(hintHeaders({})).toEqual([]);
  });
});
