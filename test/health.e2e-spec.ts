import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
import { DatabaseProbe, PROBE_INTERVAL_MS } from '../src/health/database-probe';
import { DrainService } from '../src/lifecycle/drain.service';
import { TcpProxy } from './support/tcp-proxy';
import { answerWithin } from './support/http-wait';
import { createTestApp } from './support/test-app';

const databaseUrl = (): string => process.env.DATABASE_URL!;
const up = { status: 'up' };

describe('liveness and readiness', () => {
  let proxy: TcpProxy;
  let app: NestExpressApplication;

  beforeEach(async () => {
    proxy = TcpProxy.forDatabaseUrl(databaseUrl());
    await proxy.start();
    app = await createTestApp({ DATABASE_URL: proxy.rewrite(databaseUrl()), DB_ACQUIRE_TIMEOUT_MS: '500' });
  });

  afterEach(async () => {
    await app?.close();
    await proxy.stop();
  });

  it('both answer 200 on a broker that can work', async () => {
    const http = request(app.getHttpServer());
    await http.get('/health/live').expect(200, { status: 'ok', info: {}, error: {}, details: {} });
    await http.get('/health/ready').expect(200, {
      status: 'ok',
      info: { database: up, migrations: up, shutdown: up },
      error: {},
      details: { database: up, migrations: up, shutdown: up },
    });
  });

  it('readiness is 503 naming the database while it cannot be reached, liveness stays 200, and readiness comes back with it', async () => {
    const http = request(app.getHttpServer());
    await proxy.stop();

    // The probe's answer stands for a second (PROBE_INTERVAL_MS), however many ask.
    const down = await answerWithin(() => http.get('/health/ready'), 503);
    expect(down.body).toMatchObject({
      error: 'not ready: database',
      status: 'error',
      details: { database: { status: 'down' }, migrations: up, shutdown: up },
    });
    // A public answer: the kind of failure, never the driver's text with the database's address.
    expect(['pool', 'database timeout']).toContain(down.body.details.database.message);
    expect(JSON.stringify(down.body)).not.toMatch(/ECONN|127\.0\.0\.1|:\d{4,5}/);
    await http.get('/health/live').expect(200);

    await proxy.start();
    await answerWithin(() => http.get('/health/ready'), 200);
  });

  it('readiness turns 503 the moment shutdown begins, while liveness stays 200 until the process exits', async () => {
    await request(app.getHttpServer()).get('/health/ready').expect(200);

    app.get(DrainService).begin();

    // The broker's own listener is closed now; a connection still open to it (a load balancer's) goes
    // through the same Express application, reached here on a server of the test's own.
    const http = request(app.getHttpAdapter().getInstance());

    const ready = await http.get('/health/ready').expect(503);
    expect(ready.body).toEqual({ error: 'shutting down' });
    expect(ready.headers['retry-after']).toBe('1');
    await http.get('/health/live').expect(200);
  });
});

describe('readiness under a crowd of callers', () => {
  let app: NestExpressApplication;

  beforeAll(async () => {
    app = await createTestApp({ DB_POOL_SIZE: '2', DB_ACQUIRE_TIMEOUT_MS: '300' });
  });

  afterAll(async () => {
    await app?.close();
  });

  it('asks the database at most once per second however many callers come, and not through the pool', async () => {
    const probe = app.get(DatabaseProbe);
    const http = request(app.getHttpServer());
    await http.get('/health/ready').expect(200);
    // Every pooled connection busy: a readiness check through the pool would answer 503 "pool".
    const pool = app.get(Database).pool;
    const held = await Promise.all([pool.connect(), pool.connect()]);
    try {
      const before = probe.made;
      const started = performance.now();
      const answers = await Promise.all(Array.from({ length: 200 }, () => http.get('/health/ready')));
      const seconds = (performance.now() - started) / 1000;
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
      expect(probe.made - before).toBeLessThanOrEqual(Math.ceil(seconds / (PROBE_INTERVAL_MS / 1000)) + 1);
      await http.get('/health').expect(200, { status: 'ok', database: 'up' });
    } finally {
      for (const client of held) client.release();
    }
  });
});
