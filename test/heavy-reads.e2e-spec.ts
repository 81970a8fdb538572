import { ConsumerGroupsService } from '../src/consumer-groups/consumer-groups.service';
import { TOO_MANY_HEAVY_READS } from '../src/limits/heavy-read';
import { BrokerClient } from './support/broker-client';
import { newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitFor } from './support/wait';

/** Listings held in progress until the test lets them finish, so the cap is reached by events, not by timing. */
function holdListings(service: ConsumerGroupsService): {
  started: () => number;
  finish: () => void;
  restore: () => void;
} {
  const original = service.lagging.bind(service);
  let started = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const spy = jest.spyOn(service, 'lagging').mockImplementation(async (...args) => {
    started += 1;
    await gate;
    return original(...args);
  });
  return { started: () => started, finish: () => open(), restore: () => spy.mockRestore() };
}

describe('heavy reads: TENANT_MAX_HEAVY_READS', () => {
  const broker = useTestBroker({ TENANT_MAX_HEAVY_READS: '2' });

  it('refuses a tenant its third listing at once with 429 and Retry-After, and serves it again once one ends', async () => {
    const { client, app } = broker;
    await client.pushMany('orders', 2, 'p1');
    const held = holdListings(app.get(ConsumerGroupsService));
    try {
      const inProgress = [
        client.get('/api/v1/consumer-groups/lagging'),
        client.get('/api/v1/consumer-groups/lagging'),
      ].map((call) => call.then((answer) => answer));
      await waitFor(() => held.started() === 2, 'two listings in progress');

      const refused = await client.get('/api/v1/consumer-groups').expect(429);
      expect(refused.body).toEqual({ error: TOO_MANY_HEAVY_READS });
      expect(refused.headers['retry-after']).toBe('1');
      await client.get('/api/v1/messages', { queue: 'orders' }).expect(429);

      // The tenant's own pushes, pops and acks, its light reads, and other tenants' listings go on.
      await client.pushMany('orders', 1, 'p2');
      const popped = await client.popLeased('orders', { consumerGroup: 'g' });
      await client.ackAll(popped).expect(200);
      await client.get('/api/v1/resources/quotas').expect(200);
      const other = new BrokerClient(app, newTenant());
      await other.get('/api/v1/consumer-groups').expect(200);

      held.finish();
      for (const answer of await Promise.all(inProgress)) expect(answer.status).toBe(200);
      await client.get('/api/v1/consumer-groups').expect(200);
    } finally {
      held.finish();
      held.restore();
    }
  });

  it('gives the permit back when the listing fails', async () => {
    const { client } = broker;
    for (let n = 0; n < 3; n += 1) await client.get('/api/v1/consumer-groups', { queue: 'missing' }).expect(404);
    await client.get('/api/v1/consumer-groups').expect(200);
  });
});
