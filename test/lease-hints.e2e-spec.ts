import type { Response } from 'supertest';
import { RENEW_FRACTION, RENEW_JITTER } from '../src/lease/renewal-hints';
import { MetricsService } from '../src/metrics/metrics.service';
import { BrokerClient } from './support/broker-client';
import { expireLeases, leaseSecondsLeft, sql } from './support/db-state';
import { createTestApp, newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitFor } from './support/wait';

const RENEW_AFTER = 'leasehold-renew-after';
const DEADLINE_AFTER = 'leasehold-deadline-after';
const STATUS = 'leasehold-lease-status';

/** Generous for a loaded machine: what a renewal's own duration may take off what it reports. */
const SLACK_SECONDS = 5;

const hint = (response: Response, header: string): number | undefined =>
  response.headers[header] === undefined ? undefined : Number(response.headers[header]);

describe('what an extend answer says besides its body', () => {
  const broker = useTestBroker();

  describe('the renewal hint', () => {
    it('asks for the next renewal after a jittered third of what the lease has left, and names no deadline', async () => {
      const { leaseId } = await broker.client.pushAndPop('orders', 1);

      const response = await broker.client.extend(leaseId!, 60);

      expect(response.body).toMatchObject({ success: true, renewed: 1 });
      const renewAfter = hint(response, RENEW_AFTER)!;
      expect(response.headers[RENEW_AFTER]).toMatch(/^\d+\.\d{3}$/);
      expect(renewAfter).toBeLessThanOrEqual(60 * RENEW_FRACTION);
      expect(renewAfter).toBeGreaterThanOrEqual((60 - SLACK_SECONDS) * RENEW_FRACTION * (1 - RENEW_JITTER));
      expect(response.headers[DEADLINE_AFTER]).toBeUndefined();
      expect(response.headers[STATUS]).toBeUndefined();
    });

    it('differs between renewals, so that workers that popped together drift apart', async () => {
      const { leaseId } = await broker.client.pushAndPop('orders', 1);

      const hints = new Set<string>();
      for (let n = 0; n < 12; n++) hints.add((await broker.client.extend(leaseId!, 600)).headers[RENEW_AFTER]);

      // Twelve equal draws from a 40 s wide range, to the millisecond, would be a broken jitter.
      expect(hints.size).toBeGreaterThan(6);
    });

    it('is a share of the lease as it stands when a shorter renewal cannot shorten it', async () => {
      const { leaseId } = await broker.client.pushAndPop('orders', 1, { leaseSeconds: 300 });

      const response = await broker.client.extend(leaseId!, 10);

      expect(hint(response, RENEW_AFTER)).toBeGreaterThan((300 - SLACK_SECONDS) * RENEW_FRACTION * (1 - RENEW_JITTER));
    });
  });

  describe("the reason for renewed 0, for the caller's own tenant only", () => {
    it('says expired when the lease ran out unrenewed and nobody claimed it again', async () => {
      const { leaseId } = await broker.client.pushAndPop('orders', 1);
      await expireLeases(broker.dataSource, broker.client.tenant, leaseId!);

      const response = await broker.client.extend(leaseId!);

      expect(response.body).toMatchObject({ success: false, renewed: 0 });
      expect(response.headers[STATUS]).toBe('expired');
      expect(response.headers[RENEW_AFTER]).toBeUndefined();
    });

    it('says unknown once the lease is released by an ack', async () => {
      const pop = await broker.client.pushAndPop('orders', 1);
      expect((await broker.client.ackAll(pop)).body[0].leaseReleased).toBe(true);

      expect((await broker.client.extend(pop.leaseId!)).headers[STATUS]).toBe('unknown');
    });

    it('says unknown once another pop has claimed the batch again', async () => {
      const { leaseId } = await broker.client.pushAndPop('orders', 1);
      await expireLeases(broker.dataSource, broker.client.tenant, leaseId!);
      expect((await broker.client.pop('orders')).status).toBe(200);

      expect((await broker.client.extend(leaseId!)).headers[STATUS]).toBe('unknown');
    });

    it.each([
      ['a lease that never existed', '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90'],
      ['an id that is not a UUID', 'not-a-lease'],
    ])('says unknown for %s', async (_name, leaseId) => {
      expect((await broker.client.extend(leaseId)).headers[STATUS]).toBe('unknown');
    });

    it("answers another tenant's expired lease exactly like one that never existed", async () => {
      const { leaseId } = await broker.client.pushAndPop('orders', 1);
      await expireLeases(broker.dataSource, broker.client.tenant, leaseId!);
      const stranger = new BrokerClient(broker.app, newTenant());
      const neverExisted = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

      const foreign = await stranger.extend(leaseId!);
      const unknown = await stranger.extend(neverExisted);

      const comparable = (response: Response, id: string) => {
        const { date: _date, 'x-request-id': _requestId, ...headers } = response.headers;
        return { status: response.status, headers, body: response.text.split(id).join('<id>') };
      };
      expect(comparable(foreign, leaseId!)).toEqual(comparable(unknown, neverExisted));
      expect(foreign.headers[STATUS]).toBe('unknown');
      // The owner still hears the truth about the same lease.
      expect((await broker.client.extend(leaseId!)).headers[STATUS]).toBe('expired');
    });
  });
});

describe('LEASE_MAX_TOTAL_SECONDS', () => {
  const CEILING = 120;
  const broker = useTestBroker({ LEASE_MAX_TOTAL_SECONDS: String(CEILING) });

  it("caps the pop's leaseSeconds", async () => {
    const { leaseId } = await broker.client.pushAndPop('orders', 1, { leaseSeconds: 3600 });

    const [left] = await leaseSecondsLeft(broker.dataSource, broker.client.tenant, leaseId!);
    expect(left).toBeLessThanOrEqual(CEILING);
    expect(left).toBeGreaterThan(CEILING - SLACK_SECONDS);
  });

  it('names the deadline on every renewal and keeps the hint while a renewal can still extend the lease', async () => {
    const { leaseId } = await broker.client.pushAndPop('orders', 1, { leaseSeconds: 10 });

    const response = await broker.client.extend(leaseId!, 30);

    expect(response.body).toMatchObject({ success: true, renewed: 1 });
    expect(hint(response, DEADLINE_AFTER)).toBeLessThanOrEqual(CEILING);
    expect(hint(response, DEADLINE_AFTER)).toBeGreaterThan(CEILING - SLACK_SECONDS);
    expect(hint(response, RENEW_AFTER)).toBeLessThanOrEqual(30 * RENEW_FRACTION);
  });

  it('stops extending at the ceiling: the lease stays live until it, and the answer drops the hint', async () => {
    const { leaseId } = await broker.client.pushAndPop('orders', 1, { leaseSeconds: 10 });
    const atCeiling = async () =>
      (await broker.app.get(MetricsService).renewals.get()).values.find(
        (value) => value.labels.outcome === 'at_ceiling',
      )?.value ?? 0;
    const countedBefore = await atCeiling();

    const response = await broker.client.extend(leaseId!, 3600);

    expect(response.body).toMatchObject({ success: true, renewed: 1 });
    expect(response.headers[RENEW_AFTER]).toBeUndefined();
    const deadline = hint(response, DEADLINE_AFTER)!;
    expect(deadline).toBeGreaterThan(CEILING - SLACK_SECONDS);
    const [row] = await sql(
      broker.dataSource,
      'SELECT lease_expires_at = lease_deadline AS at_ceiling FROM consumers WHERE tenant_id = $1 AND lease_id = $2',
      [broker.client.tenant, leaseId],
    );
    expect(row.at_ceiling).toBe(true);
    // Renewing again changes nothing, and says so the same way.
    const again = await broker.client.extend(leaseId!, 3600);
    expect(again.body.newExpiresAt).toBe(response.body.newExpiresAt);
    expect(again.headers[RENEW_AFTER]).toBeUndefined();
    // The first reached the ceiling and the second found the lease there: both count as at_ceiling.
    expect((await atCeiling()) - countedBefore).toBe(2);
  });

  it('never shortens a lease that already runs past a ceiling lowered since its claim', async () => {
    const { leaseId } = await broker.client.pushAndPop('orders', 1, { leaseSeconds: 100 });
    await sql(
      broker.dataSource,
      `UPDATE consumers SET lease_deadline = now() + interval '10 seconds' WHERE tenant_id = $1 AND lease_id = $2`,
      [broker.client.tenant, leaseId],
    );
    const [before] = await leaseSecondsLeft(broker.dataSource, broker.client.tenant, leaseId!);

    const response = await broker.client.extend(leaseId!, 3600);

    expect(response.body).toMatchObject({ renewed: 1 });
    const [after] = await leaseSecondsLeft(broker.dataSource, broker.client.tenant, leaseId!);
    expect(after).toBeGreaterThan(before - SLACK_SECONDS);
    expect(after).toBeGreaterThan(50);
  });

  it('does not bind leases claimed while the ceiling was off', async () => {
    const unbound = await createTestApp();
    try {
      const pop = await new BrokerClient(unbound, broker.client.tenant).pushAndPop('orders', 1, { leaseSeconds: 10 });

      const response = await broker.client.extend(pop.leaseId!, 3600);

      expect(response.headers[DEADLINE_AFTER]).toBeUndefined();
      expect(hint(response, RENEW_AFTER)).toBeGreaterThan((3600 - SLACK_SECONDS) * RENEW_FRACTION * (1 - RENEW_JITTER));
    } finally {
      await unbound.close();
    }
  });
});

describe('a stuck worker under a short ceiling', () => {
  const broker = useTestBroker({ LEASE_MAX_TOTAL_SECONDS: '2' });

  it('cannot keep its partition by renewing: the lease expires at the ceiling and the batch goes to the next pop', async () => {
    const held = await broker.client.pushAndPop('orders', 1, { leaseSeconds: 1 });

    let last: Response | undefined;
    const expiries = new Set<string>();
    await waitFor(
      async () => {
        last = await broker.client.extend(held.leaseId!, 60);
        if (last.body.renewed > 0) expiries.add(last.body.newExpiresAt);
        return last.body.renewed === 0;
      },
      'the lease ending despite renewals',
      30_000,
    );

    expect(last!.headers[STATUS]).toBe('expired');
    // Renewals pushed the lease out once, to its ceiling, and never past it.
    expect(expiries.size).toBeLessThanOrEqual(1);
    const redelivered = await broker.client.pop('orders');
    expect(redelivered.status).toBe(200);
    expect(redelivered.body.messages[0]).toMatchObject({
      transactionId: held.messages[0].transactionId,
      leaseEpoch: held.messages[0].leaseEpoch + 1,
    });
  });
});
