import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';
import { BrokerClient } from './support/broker-client';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';

const REFUSED = { error: 'cross-site request refused' };
const ALLOWED_ORIGIN = 'https://app.example.com';

/** What a browser adds to a request that a page of another site makes. */
const FROM_ANOTHER_SITE = { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'image' };

describe.each([
  ['on the fast path', true],
  ['through the router', false],
])('cross-site requests %s', (_, fastPath) => {
  let app: NestExpressApplication;
  let client: BrokerClient;
  let queue: string;

  beforeAll(async () => {
    app = await createTestApp({ HTTP_ALLOWED_ORIGINS: ALLOWED_ORIGIN }, { fastPath });
  });
  afterAll(async () => {
    await app.close();
  });
  beforeEach(async () => {
    client = new BrokerClient(app, newTenant());
    queue = `cross-${Math.random().toString(36).slice(2, 8)}`;
    await client.pushMany(queue, 5);
  });

  const server = () => app.getHttpServer();
  const popPath = () => `/api/v1/pop/queue/${queue}?autoAck=true&batch=5`;

  /** Nothing was consumed: a pop without browser headers still gets all five messages. */
  async function expectAllFiveLeft(): Promise<void> {
    const left = await client.pop(queue, { batch: 10 }).expect(200);
    expect(left.body.messages).toHaveLength(5);
  }

  it('refuses an autoAck pop that a page of another site makes (Sec-Fetch-Site: cross-site), 403, and consumes nothing', async () => {
    const answer = await request(server())
      .get(popPath())
      .set(TENANT_HEADER, client.tenant)
      .set(FROM_ANOTHER_SITE)
      .expect(403);
    expect(answer.body).toEqual(REFUSED);
    await expectAllFiveLeft();
  });

  it('refuses a sibling subdomain (Sec-Fetch-Site: same-site) and an Origin naming another host', async () => {
    await request(server())
      .get(popPath())
      .set(TENANT_HEADER, client.tenant)
      .set({ 'sec-fetch-site': 'same-site', origin: 'https://evil.broker.example' })
      .expect(403, REFUSED);
    await request(server())
      .get(popPath())
      .set(TENANT_HEADER, client.tenant)
      .set({ origin: 'http://evil.example' })
      .expect(403, REFUSED);
    await request(server()).get(popPath()).set(TENANT_HEADER, client.tenant).set({ origin: 'null' }).expect(403);
    await request(server())
      .get(popPath())
      .set(TENANT_HEADER, client.tenant)
      .set({ referer: 'http://evil.example/attack.html' })
      .expect(403, REFUSED);
    await expectAllFiveLeft();
  });

  it('refuses a cross-site push and ack before reading them, storing nothing', async () => {
    const other = `${queue}-pushed`;
    for (const headers of [FROM_ANOTHER_SITE, { origin: 'http://evil.example' }]) {
      const pushed = await request(server())
        .post('/api/v1/push')
        .set(TENANT_HEADER, client.tenant)
        .set(headers)
        .send({ items: [{ queue: other, payload: { forged: true } }] })
        .expect(403);
      expect(pushed.body).toEqual(REFUSED);
      expect(pushed.headers.connection).toBe('close');
    }
    await client.pop(other).expect(204);

    const leased = await client.popLeased(queue, { batch: 5 });
    await request(server())
      .post('/api/v1/ack')
      .set(TENANT_HEADER, client.tenant)
      .set(FROM_ANOTHER_SITE)
      .send({
        transactionId: leased.messages[0].transactionId,
        partitionId: leased.partitionId,
        leaseId: leased.leaseId,
        status: 'completed',
      })
      .expect(403, REFUSED);
    await request(server())
      .post(`/api/v1/lease/${leased.leaseId}/extend`)
      .set(TENANT_HEADER, client.tenant)
      .set(FROM_ANOTHER_SITE)
      .send({ seconds: 60 })
      .expect(403, REFUSED);
  });

  it('serves same-origin browser requests, typed addresses, Origins naming the Host, and clients that send none of these', async () => {
    const host = `127.0.0.1:${await portOf(app)}`;
    const leased = await request(server())
      .get(`/api/v1/pop/queue/${queue}?batch=1`)
      .set(TENANT_HEADER, client.tenant)
      .set({ 'sec-fetch-site': 'same-origin', origin: `http://${host}` })
      .expect(200);
    expect(leased.body.messages).toHaveLength(1);
    await request(server())
      .get(`/api/v1/pop/queue/${queue}?batch=1&consumerGroup=typed`)
      .set(TENANT_HEADER, client.tenant)
      .set({ 'sec-fetch-site': 'none' })
      .expect(200);
    await request(server())
      .post('/api/v1/push')
      .set(TENANT_HEADER, client.tenant)
      .set({ host, origin: `http://${host}` })
      .send({ items: [{ queue, payload: { sameOrigin: true } }] })
      .expect(201);
    await request(server())
      .get(`/api/v1/pop/queue/${queue}?batch=1&consumerGroup=plain`)
      .set(TENANT_HEADER, client.tenant)
      .expect(200);
  });

  it('serves an allow-listed origin with CORS headers, and answers its preflight', async () => {
    const popped = await request(server())
      .get(`/api/v1/pop/queue/${queue}?batch=5&autoAck=true`)
      .set(TENANT_HEADER, client.tenant)
      .set({ 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors', origin: ALLOWED_ORIGIN })
      .expect(200);
    expect(popped.body.messages).toHaveLength(5);
    expect(popped.headers['access-control-allow-origin']).toBe(ALLOWED_ORIGIN);
    expect(popped.headers['access-control-expose-headers']).toContain('x-request-id');
    expect(popped.headers['access-control-allow-credentials']).toBeUndefined();
    expect(popped.headers.vary).toContain('Origin');

    const preflight = await request(server())
      .options('/api/v1/push')
      .set({
        origin: ALLOWED_ORIGIN,
        'sec-fetch-site': 'cross-site',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      })
      .expect(204);
    expect(preflight.headers['access-control-allow-origin']).toBe(ALLOWED_ORIGIN);
    expect(preflight.headers['access-control-allow-methods']).toBe('GET,HEAD,POST,DELETE');
    expect(preflight.headers['access-control-allow-headers']).toBe('authorization,content-type');
    expect(preflight.headers['access-control-max-age']).toBe('600');

    await request(server())
      .options('/api/v1/push')
      .set({ origin: 'https://evil.example', 'sec-fetch-site': 'cross-site', 'access-control-request-method': 'POST' })
      .expect(403, REFUSED);
    // Same-origin and non-browser requests get no CORS headers: nothing changes for them.
    const plain = await client.pop(queue).expect(204);
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('lets other sites open the console and Swagger UI, and refuses them the probes, metrics and the pages written to', async () => {
    for (const path of ['/console/', '/docs', '/docs-json']) {
      await request(server()).get(path).set(FROM_ANOTHER_SITE).expect(200);
    }
    await request(server()).post('/console/').set(FROM_ANOTHER_SITE).expect(403, REFUSED);
    for (const path of ['/health', '/health/live', '/health/ready', '/metrics', '/api/v1/resources/queues']) {
      await request(server()).get(path).set(FROM_ANOTHER_SITE).expect(403, REFUSED);
    }
  });
});

describe('cross-site requests with auth on', () => {
  let app: NestExpressApplication;

  beforeAll(async () => {
    app = await createTestApp({ JWT_ENABLED: 'true', JWT_SECRET: TEST_JWT_SECRET, TENANT_HEADER: undefined });
  });
  afterAll(async () => {
    await app.close();
  });

  it('are refused before the token is looked at', async () => {
    await request(app.getHttpServer()).get('/api/v1/pop/queue/q').set(FROM_ANOTHER_SITE).expect(403, REFUSED);
    const token = hsToken({ tenant: newTenant(), role: 'admin' });
    await request(app.getHttpServer())
      .get('/api/v1/resources/queues')
      .set('authorization', `Bearer ${token}`)
      .set({ origin: 'http://evil.example' })
      .expect(403, REFUSED);
    await request(app.getHttpServer())
      .get('/api/v1/resources/queues')
      .set('authorization', `Bearer ${token}`)
      .expect(200);
  });

  it('are answered at once, without waiting for a body that is still arriving', async () => {
    const port = await portOf(app);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        // Announces 1 MB and sends none of it: the answer cannot have waited for the body.
        socket.write(
          'POST /api/v1/push HTTP/1.1\r\nHost: x\r\nOrigin: http://evil.example\r\n' +
            'Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n',
        );
      });
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 403/);
    expect(answer).toMatch(/connection: close/i);
    expect(answer).toContain(JSON.stringify(REFUSED));
  });
});

async function portOf(app: NestExpressApplication): Promise<number> {
  const server = app.getHttpServer();
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}
