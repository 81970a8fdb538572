import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NestExpressApplication } from '@nestjs/platform-express';
import { sign } from 'jsonwebtoken';
import request from 'supertest';
import { Database } from '../src/database/database';
import { MetricsServer } from '../src/metrics/metrics.server';
import { MetricsService } from '../src/metrics/metrics.service';
import { BrokerClient, PopBody } from './support/broker-client';
import { expireLeases } from './support/db-state';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { waitFor } from './support/wait';

type Samples = Map<string, number>;

/** Prometheus text format: `name{labels} value` per line, comments skipped. */
function parse(text: string): Samples {
  const samples: Samples = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const split = line.lastIndexOf(' ');
    samples.set(line.slice(0, split), Number(line.slice(split + 1)));
  }
  return samples;
}

/** A counter's value, or a histogram's `_count` or `_sum`, summed over the series matching `labels`. */
async function valueOf(metrics: MetricsService, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric =
    metrics.registry.getSingleMetric(name) ?? metrics.registry.getSingleMetric(name.replace(/_(count|sum)$/, ''));
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return values
    .filter((value) => ((value as { metricName?: string }).metricName ?? name) === name)
    .filter((value) => Object.entries(labels).every(([key, wanted]) => String(value.labels[key]) === wanted))
    .reduce((sum, value) => sum + value.value, 0);
}

describe('GET /metrics', () => {
  describe('a scripted scenario moves each metric by exactly what happened', () => {
    let app: NestExpressApplication;
    let metrics: MetricsService;
    let client: BrokerClient;
    const queue = `metered-${newTenant().slice(0, 8)}`;
    const doomed = `doomed-${newTenant().slice(0, 8)}`;

    beforeAll(async () => {
      app = await createTestApp();
      metrics = app.get(MetricsService);
      client = new BrokerClient(app, newTenant());
    });

    afterAll(async () => {
      await app.close();
    });

    it("names every metric it registers in docs/operations.md's table, the process's own aside", () => {
      const documented = readFileSync(join(__dirname, '..', 'docs', 'operations.md'), 'utf8');
      const registered = metrics.registry
        .getMetricsAsArray()
        .map((metric) => metric.name)
        .filter((name) => !metrics.processMetrics.has(name));

      expect(registered.length).toBeGreaterThan(20);
      expect(registered.filter((name) => !documented.includes(`| \`${name}\``))).toEqual([]);
    });

    it('push, pop, renew, an expired lease, a nack, a retry, a dead letter', async () => {
      const counters = {
        pushed: () => valueOf(metrics, 'leasehold_pushed_messages_total', { queue }),
        popped: () => valueOf(metrics, 'leasehold_popped_messages_total', { queue }),
        renewed: () => valueOf(metrics, 'leasehold_lease_renewals_total', { outcome: 'renewed' }),
        notRenewed: () => valueOf(metrics, 'leasehold_lease_renewals_total', { outcome: 'not_renewed' }),
        slackCount: () => valueOf(metrics, 'leasehold_lease_renewal_slack_seconds_count'),
        lost: () => valueOf(metrics, 'leasehold_leases_lost_total', { queue }),
        expiry: () => valueOf(metrics, 'leasehold_redelivered_messages_total', { queue, cause: 'expiry' }),
        nack: () => valueOf(metrics, 'leasehold_redelivered_messages_total', { queue, cause: 'nack' }),
        retry: () => valueOf(metrics, 'leasehold_redelivered_messages_total', { queue, cause: 'retry' }),
        deadLettered: () => valueOf(metrics, 'leasehold_dead_lettered_messages_total', { queue: doomed }),
        completed: () => valueOf(metrics, 'leasehold_acks_total', { status: 'completed', outcome: 'accepted' }),
        failed: () => valueOf(metrics, 'leasehold_acks_total', { status: 'failed', outcome: 'accepted' }),
        refused: () => valueOf(metrics, 'leasehold_acks_total', { outcome: 'refused' }),
        emptyPops: () => valueOf(metrics, 'leasehold_pops_total', { outcome: 'empty' }),
        renewalStatements: () => valueOf(metrics, 'leasehold_renewal_statement_seconds_count'),
        renewalGroups: () => valueOf(metrics, 'leasehold_renewal_group_size_count'),
      };
      const snapshot = async () =>
        Object.fromEntries(await Promise.all(Object.entries(counters).map(async ([key, read]) => [key, await read()])));
      const before = await snapshot();

      await client.pushMany(queue, 2, 'a');
      await client.pushMany(queue, 1, 'b');
      await client.pushMany(queue, 3, 'c');
      // Renewed with 60 s left on a 60 s lease, and a renewal of nothing.
      const a = (await client.pop(queue, { leaseSeconds: 60 }, 'a')).body as PopBody;
      expect((await client.extend(a.leaseId!, 60)).body.renewed).toBe(1);
      expect((await client.extend(newTenant(), 60)).body.renewed).toBe(0);
      // b's lease runs out unrenewed and its message is claimed back.
      const b = (await client.pop(queue, { leaseSeconds: 60 }, 'b')).body as PopBody;
      await expireLeases(app.get(Database), client.tenant, b.leaseId!);
      const bAgain = (await client.pop(queue, { leaseSeconds: 60 }, 'b')).body as PopBody;
      expect(bAgain.messages[0].deliveryAttempt).toBe(2);
      // c's batch of three is nacked through its first message: all three are handed back.
      const c = (await client.pop(queue, { leaseSeconds: 60, batch: 10 }, 'c')).body as PopBody;
      expect(c.messages).toHaveLength(3);
      expect((await client.ack({ ...pick(c, 0), status: 'failed' })).body).toMatchObject([{ success: true }]);
      // e's message is handed back for a retry.
      await client.pushMany(queue, 1, 'e');
      const e = (await client.pop(queue, { leaseSeconds: 60 }, 'e')).body as PopBody;
      expect((await client.ack({ ...pick(e, 0), status: 'retry' })).body).toMatchObject([{ success: true }]);
      // a is completed; one more ack of it is refused.
      expect((await client.ackAll(a)).body.every((result: { success: boolean }) => result.success)).toBe(true);
      expect((await client.ack({ ...pick(a, 0), status: 'completed' })).body).toMatchObject([{ success: false }]);
      // One message of a queue without retries goes to its dead-letter queue.
      await client.configure({ queue: doomed, options: { retryLimit: 0, deadLetterQueue: true } }).expect(200);
      await client.pushMany(doomed, 1);
      const d = (await client.pop(doomed, { leaseSeconds: 60 })).body as PopBody;
      expect((await client.ack({ ...pick(d, 0), status: 'failed' })).body).toMatchObject([
        { success: true, dlq: true },
      ]);
      expect((await client.pop(`${queue}-absent`)).status).toBe(204);

      const after = await snapshot();
      const delta = Object.fromEntries(Object.keys(counters).map((key) => [key, after[key] - before[key]]));
      expect(delta).toEqual({
        pushed: 7,
        popped: 2 + 1 + 1 + 3 + 1,
        renewed: 1,
        notRenewed: 1,
        slackCount: 1,
        lost: 1,
        expiry: 1,
        nack: 3,
        retry: 1,
        deadLettered: 1,
        completed: 2,
        failed: 2,
        refused: 1,
        emptyPops: 1,
        renewalStatements: 2,
        renewalGroups: 2,
      });
      // The renewal reached a 60 s lease with nearly all of it left.
      const slack = await valueOf(metrics, 'leasehold_lease_renewal_slack_seconds_sum');
      expect(slack).toBeGreaterThan(30);
      expect(slack).toBeLessThanOrEqual(60);

      const scraped = await request(app.getHttpServer()).get('/metrics').expect(200);
      expect(scraped.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
      const samples = parse(scraped.text);
      // Read when scraped: b holds one message under a live lease, c's three and e's one wait; a is done.
      expect(samples.get(`leasehold_consumer_lag_messages{queue="${queue}",consumer_group="__QUEUE_MODE__"}`)).toBe(5);
      expect(samples.get(`leasehold_queue_depth_messages{queue="${queue}"}`)).toBe(5);
      expect(samples.get('leasehold_db_pool_max')).toBe(4);
      expect(samples.has('leasehold_db_pool_connections{state="in_use"}')).toBe(true);
      expect(samples.has('leasehold_parked_polls')).toBe(true);
      expect(samples.get('leasehold_http_requests_waiting')).toBe(0);
      expect(samples.has('leasehold_http_requests_deferred_total')).toBe(true);
      expect(samples.has('leasehold_listener_connected')).toBe(true);
      expect(samples.get('leasehold_draining')).toBe(0);
      expect(samples.has('leasehold_process_resident_memory_bytes')).toBe(true);
      // Requests by route pattern, never by raw path.
      const routes = [...samples.keys()].filter((key) =>
        key.startsWith('leasehold_http_request_duration_seconds_count'),
      );
      expect(routes).toEqual(
        expect.arrayContaining([
          'leasehold_http_request_duration_seconds_count{method="GET",route="/api/v1/pop/queue/:queue/partition/:partition",status_class="2xx"}',
          'leasehold_http_request_duration_seconds_count{method="POST",route="/api/v1/lease/:leaseId/extend",status_class="2xx"}',
          'leasehold_http_request_duration_seconds_count{method="POST",route="/api/v1/configure",status_class="2xx"}',
        ]),
      );
      expect(routes.filter((key) => key.includes(queue) || key.includes(a.leaseId!))).toEqual([]);
      // No tenant label unless METRICS_TENANT_LABELS allows it.
      expect([...samples.keys()].filter((key) => key.includes(client.tenant))).toEqual([]);
    });
  });

  it('labels queue series with the tenant when METRICS_TENANT_LABELS is on', async () => {
    const app = await createTestApp({ METRICS_TENANT_LABELS: 'true' });
    try {
      const client = new BrokerClient(app, newTenant());
      await client.pushMany('labelled', 2);
      const samples = parse((await request(app.getHttpServer()).get('/metrics').expect(200)).text);
      expect(samples.get(`leasehold_pushed_messages_total{tenant="${client.tenant}",queue="labelled"}`)).toBe(2);
      expect(samples.get(`leasehold_queue_depth_messages{tenant="${client.tenant}",queue="labelled"}`)).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('gives at most METRICS_MAX_QUEUE_SERIES queues series of their own; the rest add up in __other__', async () => {
    const app = await createTestApp({ METRICS_MAX_QUEUE_SERIES: '3', METRICS_MAX_QUEUE_SERIES_PER_TENANT: '3' });
    try {
      const client = new BrokerClient(app, newTenant());
      for (let index = 0; index < 10; index += 1) await client.pushMany(`many-${index}`, 2);

      const { values } = await app.get(MetricsService).pushedMessages.get();
      expect(values.map((value) => value.labels.queue).sort()).toEqual(['__other__', 'many-0', 'many-1', 'many-2']);
      expect(values.find((value) => value.labels.queue === '__other__')?.value).toBe(14);
      const text = (await request(app.getHttpServer()).get('/metrics').expect(200)).text;
      expect(text).not.toContain('many-9');
    } finally {
      await app.close();
    }
  });

  describe('queue series shared between tenants', () => {
    let app: NestExpressApplication;
    let metrics: MetricsService;

    beforeAll(async () => {
      app = await createTestApp({ METRICS_MAX_QUEUE_SERIES: '6', METRICS_MAX_QUEUE_SERIES_PER_TENANT: '2' });
      metrics = app.get(MetricsService);
    });

    afterAll(async () => {
      await app.close();
    });

    const pushedSeries = async (): Promise<Map<string, number>> =>
      new Map((await metrics.pushedMessages.get()).values.map((value) => [String(value.labels.queue), value.value]));
    const scraped = async (): Promise<string> => (await request(app.getHttpServer()).get('/metrics').expect(200)).text;
    const deleteQueue = async (client: BrokerClient, queue: string): Promise<void> => {
      const answer = await client.delete(`/api/v1/resources/queues/${queue}`).expect(200);
      expect(answer.body).toMatchObject({ deleted: true });
    };

    it("gives each tenant at most its share: one tenant's many queues cannot take another's series", async () => {
      const greedy = new BrokerClient(app, newTenant());
      const prefix = `greedy-${greedy.tenant.slice(0, 6)}`;
      for (let index = 0; index < 8; index += 1) await greedy.pushMany(`${prefix}-${index}`, 1);
      const other = new BrokerClient(app, newTenant());
      const own = [`own-${other.tenant.slice(0, 6)}-a`, `own-${other.tenant.slice(0, 6)}-b`];
      for (const queue of own) await other.pushMany(queue, 3);

      const series = await pushedSeries();
      expect([...series.keys()].filter((queue) => queue.startsWith(prefix)).sort()).toEqual([
        `${prefix}-0`,
        `${prefix}-1`,
      ]);
      expect(series.get('__other__')).toBe(6);
      expect(own.map((queue) => series.get(queue))).toEqual([3, 3]);

      for (let index = 0; index < 8; index += 1) await deleteQueue(greedy, `${prefix}-${index}`);
      for (const queue of own) await deleteQueue(other, queue);
    });

    it("frees a deleted queue's series: gone from /metrics, its place taken by another, and its own again when recreated", async () => {
      const client = new BrokerClient(app, newTenant());
      const [first, second, third] = ['first', 'second', 'third'].map((name) => `${name}-${client.tenant.slice(0, 6)}`);
      await client.pushMany(first, 2);
      await client.pushMany(second, 1);
      await client.popLeased(first);
      const before = await scraped();
      expect(before).toContain(`leasehold_pushed_messages_total{queue="${first}"} 2`);
      expect(before).toContain(`leasehold_popped_messages_total{queue="${first}"} 2`);

      await deleteQueue(client, first);
      // Depth and lag are read from the database (the deleted queue leaves them at the next read): counters only here.
      const text = await scraped();
      expect(text).not.toMatch(new RegExp(`_total\\{queue="${first}"`));
      expect(text).toContain(`leasehold_pushed_messages_total{queue="${second}"} 1`);

      await client.pushMany(third, 4);
      expect((await pushedSeries()).get(third)).toBe(4);
      await deleteQueue(client, third);
      await client.pushMany(first, 5, undefined, 'again');
      expect((await pushedSeries()).get(first)).toBe(5);

      for (const queue of [first, second]) await deleteQueue(client, queue);
      expect([...(await pushedSeries()).keys()].filter((queue) => queue.includes(client.tenant.slice(0, 6)))).toEqual(
        [],
      );
    });

    it('keeps a series that same-named queues of two tenants share until both are deleted', async () => {
      const [a, b] = [new BrokerClient(app, newTenant()), new BrokerClient(app, newTenant())];
      const shared = `shared-${a.tenant.slice(0, 6)}`;
      await a.pushMany(shared, 1);
      await b.pushMany(shared, 2);
      expect((await pushedSeries()).get(shared)).toBe(3);
      await deleteQueue(a, shared);
      expect((await pushedSeries()).get(shared)).toBe(3);
      await deleteQueue(b, shared);
      expect((await pushedSeries()).has(shared)).toBe(false);
    });
  });

  (onEmbeddedDatabase ? it.skip : it)(
    'frees the series of a queue deleted through another broker process, which tells it with NOTIFY',
    async () => {
      const [deleting, counting] = await Promise.all([createTestApp(), createTestApp()]);
      try {
        const tenant = newTenant();
        const queue = `elsewhere-${tenant.slice(0, 6)}`;
        await new BrokerClient(counting, tenant).pushMany(queue, 2);
        const series = async () =>
          (await counting.get(MetricsService).pushedMessages.get()).values.filter(
            (value) => value.labels.queue === queue,
          );
        expect((await series()).map((value) => value.value)).toEqual([2]);

        await new BrokerClient(deleting, tenant).delete(`/api/v1/resources/queues/${queue}`).expect(200);
        await waitFor(async () => (await series()).length === 0, 'the series dropped by the other process');
      } finally {
        await Promise.all([deleting.close(), counting.close()]);
      }
    },
  );

  describe('who may read it', () => {
    const secret = 'metrics-test-secret-that-is-long-enough-for-hs256';
    const tenantToken = sign({ role: 'admin', tenant: newTenant() }, secret, { algorithm: 'HS256', expiresIn: '1h' });

    it('with auth on, only with METRICS_TOKEN as bearer token: a tenant admin token is not enough', async () => {
      const app = await createTestApp({
        JWT_ENABLED: 'true',
        JWT_SECRET: secret,
        METRICS_TOKEN: 'scrape-token-0123456789',
      });
      try {
        const http = request(app.getHttpServer());
        await http.get('/metrics').expect(401, { error: 'Authentication required' });
        await http.get('/metrics').set('authorization', `Bearer ${tenantToken}`).expect(401);
        const answer = await http.get('/metrics').set('authorization', 'Bearer scrape-token-0123456789').expect(200);
        expect(answer.text).toContain('leasehold_lease_renewals_total');
      } finally {
        await app.close();
      }
    });

    it('with auth on and no METRICS_TOKEN, not served on the API port at all', async () => {
      const app = await createTestApp({ JWT_ENABLED: 'true', JWT_SECRET: secret });
      try {
        await request(app.getHttpServer()).get('/metrics').set('authorization', `Bearer ${tenantToken}`).expect(404);
      } finally {
        await app.close();
      }
    });

    it('with auth off, still only with METRICS_TOKEN when it is set, on the API port and on METRICS_PORT', async () => {
      const app = await createTestApp({
        METRICS_TOKEN: 'scrape-token-0123456789',
        METRICS_PORT: '0',
        HOST: '127.0.0.1',
      });
      const api = await createTestApp({ METRICS_TOKEN: 'scrape-token-0123456789' });
      try {
        const own = `http://127.0.0.1:${app.get(MetricsServer).address!.port}`;
        expect((await fetch(`${own}/metrics`)).status).toBe(401);
        const scraped = await fetch(`${own}/metrics`, { headers: { authorization: 'Bearer scrape-token-0123456789' } });
        expect(scraped.status).toBe(200);
        const http = request(api.getHttpServer());
        await http.get('/metrics').expect(401, { error: 'Authentication required' });
        await http.get('/metrics').set('authorization', 'Bearer scrape-token-0123456789').expect(200);
      } finally {
        await app.close();
        await api.close();
      }
    });

    it('with METRICS_PORT, served on that port only, beside the liveness and readiness probes', async () => {
      const app = await createTestApp({ METRICS_PORT: '0', HOST: '127.0.0.1' });
      try {
        await request(app.getHttpServer()).get('/metrics').expect(404);
        const own = `http://127.0.0.1:${app.get(MetricsServer).address!.port}`;
        const metrics = await fetch(`${own}/metrics`);
        expect(metrics.status).toBe(200);
        expect(await metrics.text()).toContain('leasehold_parked_polls');
        const live = await fetch(`${own}/health/live`);
        expect(live.status).toBe(200);
        expect(await live.json()).toEqual({ status: 'ok', info: {}, error: {}, details: {} });
        const ready = await fetch(`${own}/health/ready`);
        expect(ready.status).toBe(200);
        expect(await ready.json()).toMatchObject({ status: 'ok', details: { database: { status: 'up' } } });
        expect((await fetch(`${own}/api/v1/push`)).status).toBe(404);
      } finally {
        await app.close();
      }
    });
  });
});

function pick(body: PopBody, index: number) {
  const message = body.messages[index];
  return { transactionId: message.transactionId, partitionId: message.partitionId, leaseId: body.leaseId };
}
