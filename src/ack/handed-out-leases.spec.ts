import {
  HANDED_OUT_BATCH,
  HANDED_OUT_LEASES,
  HANDED_OUT_MESSAGES,
  HandedOutLeases,
  HandedOutMessage,
} from './handed-out-leases';

function batch(leaseId: string, count: number, partitionOf = (_n: number) => 'P1'): HandedOutMessage[] {
  return Array.from({ length: count }, (_, n) => ({
    transactionId: `${leaseId}-m${n}`,
    partitionId: partitionOf(n),
    partition: 'p',
    leaseId,
    leaseEpoch: 4,
    seq: 11 + n,
    afterOffset: 10,
    throughOffset: 10 + count,
  }));
}

describe('HandedOutLeases', () => {
  it('remembers a batch of one partition as its claim left the cursor, until an ack takes it', () => {
    const leases = new HandedOutLeases();
    leases.handedOut('t', 'jobs', 'workers', batch('L1', 3));

    expect(leases.take('other-tenant', 'L1')).toBeUndefined();
    leases.forget('other-tenant', 'L1');
    const lease = leases.take('t', 'L1');
    expect(lease).toMatchObject({
      queue: 'jobs',
      consumerGroup: 'workers',
      partitionId: 'P1',
      leaseId: 'L1',
      leaseEpoch: 4,
      committedOffset: 10,
      leaseEndOffset: 13,
    });
    expect(lease!.transactionIds).toEqual(['L1-m0', 'L1-m1', 'L1-m2']);
    expect(lease!.seqs).toEqual([11, 12, 13]);
    expect(leases.take('t', 'L1')).toBeUndefined();
    expect(leases.size).toBe(0);
  });

  it('does not remember a batch over several partitions, one past HANDED_OUT_BATCH, or one without a lease', () => {
    const leases = new HandedOutLeases();
    leases.handedOut(
      't',
      'jobs',
      'workers',
      batch('L1', 2, (n) => `P${n}`),
    );
    leases.handedOut('t', 'jobs', 'workers', batch('L2', HANDED_OUT_BATCH + 1));
    leases.handedOut('t', 'jobs', 'workers', [{ ...batch('L3', 1)[0], leaseId: null }]);
    leases.handedOut('t', 'jobs', 'workers', []);

    expect(leases.size).toBe(0);
    expect(leases.take('t', 'L1')).toBeUndefined();
    expect(leases.take('t', 'L2')).toBeUndefined();
  });

  it('forgets the oldest leases past HANDED_OUT_LEASES', () => {
    const leases = new HandedOutLeases();
    for (let n = 0; n <= HANDED_OUT_LEASES; n += 1) leases.handedOut('t', 'jobs', 'workers', batch(`L${n}`, 1));

    expect(leases.size).toBe(HANDED_OUT_LEASES);
    expect(leases.take('t', 'L0')).toBeUndefined();
    expect(leases.take('t', 'L1')).toBeDefined();
    expect(leases.take('t', `L${HANDED_OUT_LEASES}`)).toBeDefined();
  });

  it('forgets the oldest leases past HANDED_OUT_MESSAGES, and a lease forgotten by a locking ack', () => {
    const leases = new HandedOutLeases();
    const leasesHeld = HANDED_OUT_MESSAGES / HANDED_OUT_BATCH;
    for (let n = 0; n <= leasesHeld; n += 1) leases.handedOut('t', 'jobs', 'workers', batch(`L${n}`, HANDED_OUT_BATCH));

    expect(leases.size).toBe(HANDED_OUT_MESSAGES);
    expect(leases.take('t', 'L0')).toBeUndefined();
    leases.forget('t', 'L1');
    expect(leases.take('t', 'L1')).toBeUndefined();
    expect(leases.take('t', `L${leasesHeld}`)).toBeDefined();
    expect(leases.size).toBe(HANDED_OUT_MESSAGES - 2 * HANDED_OUT_BATCH);
  });
});
