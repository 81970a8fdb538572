import { BrokerClient, PopBody } from './support/broker-client';
import { cursors, waitUntilExpired } from './support/db-state';
import { expiries, secondsUntil } from './support/lease-fixture';
import { waitFor } from './support/wait';
import { newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';

/** Leases popped through the broker: minted by a pop, extended, ended by ack, nack or expiry. */
describe('the life of a lease', () => {
  const broker = useTestBroker();

  const leasedAck = (pop: PopBody, index: number) => ({
    transactionId: pop.messages[index].transactionId,
    partitionId: pop.messages[index].partitionId,
    leaseId: pop.leaseId,
  });

  it('is not resurrected after it expires: the next pop claims the batch under a new lease with deliveryAttempt 2, the stale holder can neither extend nor ack', async () => {
    await broker.client.pushMany('jobs', 2);
    const stale: PopBody = (await broker.client.pop('jobs', { leaseSeconds: 1, batch: 10 })).body;
    await waitUntilExpired(broker.dataSource, broker.client.tenant, stale.leaseId!);

    const fresh = await broker.client.pop('jobs', { batch: 10 });
    const staleExtend = await broker.client.extend(stale.leaseId!, 60);
    const staleAck = await broker.client.ack(leasedAck(stale, 1));

    expect(fresh.status).toBe(200);
    expect(fresh.body.leaseId).not.toBe(stale.leaseId);
    expect(
      fresh.body.messages.map((message: { transactionId: string; deliveryAttempt: number }) => [
        message.transactionId,
        message.deliveryAttempt,
      ]),
    ).toEqual([
      ['jobs-Default-0', 2],
      ['jobs-Default-1', 2],
    ]);
    expect(staleExtend.body).toMatchObject({ success: false, renewed: 0 });
    expect(staleAck.body[0]).toMatchObject({ success: false, error: 'invalid or expired lease' });
    expect(await cursors(broker.dataSource, broker.client.tenant, 'jobs')).toMatchObject([
      { committedOffset: 0, leaseId: fresh.body.leaseId, leaseLive: true },
    ]);
    const freshAck = await broker.client.ackAll(fresh.body);
    expect(freshAck.body.map((result: { success: boolean }) => result.success)).toEqual([true, true]);
  });

  it('stays with a slow handler that extends it: nobody else can claim the batch past its first deadline', async () => {
    await broker.client.pushMany('jobs', 1);
    // Long enough for the extend to land on a loaded machine; the rival then pops past this first deadline.
    const pop: PopBody = (await broker.client.pop('jobs', { leaseSeconds: 3 })).body;
    const [firstDeadline] = await expiries(broker.dataSource, broker.client.tenant, [pop.partitionId]);

    const extend = await broker.client.extend(pop.leaseId!, 30);
    await waitFor(
      async () => (await secondsUntil(broker.dataSource, firstDeadline)) < 0,
      'the first deadline passing',
      30_000,
    );
    const rival = await broker.client.pop('jobs');
    const ack = await broker.client.ack(leasedAck(pop, 0));

    expect(extend.body).toMatchObject({ success: true, renewed: 1 });
    expect(rival.status).toBe(204);
    expect(ack.body[0]).toMatchObject({ success: true, leaseReleased: true });
  });

  it('renews every partition of a multi-partition pop with one extend, until an ack or a nack releases it', async () => {
    for (const partition of ['a', 'b', 'c']) await broker.client.pushMany('jobs', 1, partition);
    const pop: PopBody = (await broker.client.pop('jobs', { partitions: 3 })).body;

    const whole = await broker.client.extend(pop.leaseId!, 90);
    await broker.client.ack({ ...leasedAck(pop, 0) });
    const afterAck = await broker.client.extend(pop.leaseId!, 90);
    await broker.client.ack({ ...leasedAck(pop, 1), status: 'failed' });
    const afterNack = await broker.client.extend(pop.leaseId!, 90);

    expect(pop.partitionsClaimed).toBe(3);
    expect(whole.body).toMatchObject({ success: true, renewed: 3 });
    expect(afterAck.body).toMatchObject({ success: true, renewed: 2 });
    expect(afterNack.body).toMatchObject({ success: true, renewed: 1 });
  });

  it('cannot be extended or acknowledged from another tenant, and is left exactly as it was', async () => {
    await broker.client.pushMany('jobs', 1);
    const pop: PopBody = (await broker.client.pop('jobs')).body;
    const before = await cursors(broker.dataSource, broker.client.tenant, 'jobs');
    const intruder = new BrokerClient(broker.app, newTenant());

    const extend = await intruder.extend(pop.leaseId!, 3600);
    const ack = await intruder.ack(leasedAck(pop, 0));

    expect(extend.body).toMatchObject({ success: false, renewed: 0 });
    expect(ack.body[0]).toMatchObject({ success: false });
    expect(await cursors(broker.dataSource, broker.client.tenant, 'jobs')).toEqual(before);
  });
});
