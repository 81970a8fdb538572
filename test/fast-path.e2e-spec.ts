import { AddressInfo, connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { CallHandler, ExecutionContext, Logger, NestInterceptor } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import type { Response } from 'express';
import { Observable, tap } from 'rxjs';
import { Database } from '../src/database/database';
import { HeldConnection } from './support/held-connection';
import { AccessGuard } from '../src/auth/access.guard';
import { TenantThrottlerGuard } from '../src/limits/tenant-throttler.guard';
import { HttpExceptionFilter } from '../src/common/http-exception.filter';
import { FastPathMiddleware } from '../src/http/fast-path.middleware';
import { PushService } from '../src/push/push.service';
import { PopService } from '../src/pop/pop.service';
import { LaterAnswer } from '../src/common/later-answer';
import { RENEW_FRACTION, RENEW_JITTER } from '../src/lease/renewal-hints';
import { MetricsService } from '../src/metrics/metrics.service';
import { MaintenanceService } from '../src/maintenance/maintenance.service';
import { DrainService } from '../src/lifecycle/drain.service';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { FastRouteTable } from '../src/http/fast-route-table';
import { RegisterQueryDto } from '../src/streams/dto/register-query.dto';
import { StreamsService } from '../src/streams/streams.service';
import { expireLeases } from './support/db-state';
import { sleep } from './support/sleep';
import { waitFor } from './support/wait';
import { createLease, expiries, FixtureLease } from './support/lease-fixture';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';
import { SENT_PAYLOADS, sentItems } from './support/sent-payloads';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';

const BODY_LIMIT = 1024;
const ENV = { JWT_ENABLED: 'true', JWT_SECRET: TEST_JWT_SECRET, BODY_LIMIT: String(BODY_LIMIT) };

interface WireResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  receivedAt: number;
}

/** Sends exactly these bytes on a fresh connection and reads the whole answer. */
async function onTheWire(app: NestExpressApplication, head: string, body: Buffer | string = ''): Promise<WireResponse> {
  const server = app.getHttpServer();
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const raw = await new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
    const headers = Buffer.from(`${head}\r\nHost: leasehold\r\nConnection: close\r\n\r\n`);
    socket.write(Buffer.concat([headers, Buffer.from(body)]));
  });
  const [statusAndHeaders, ...rest] = raw.split('\r\n\r\n');
  const [statusLine, ...headerLines] = statusAndHeaders.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n'), receivedAt: Date.now() };
}

const LEASE_ROUTE = '/api/v1/lease/:leaseId/extend';
const PUSH_ROUTE = '/api/v1/push';
const ACK_BATCH_ROUTE = '/api/v1/ack/batch';
const POP_PARTITION_ROUTE = '/api/v1/pop/queue/:queue/partition/:partition';

/** Requests of a route the application has timed, as /metrics reports them. */
async function requestsTimed(app: NestExpressApplication, route = LEASE_ROUTE): Promise<number> {
  const { values } = await app.get(MetricsService).httpDuration.get();
  return values
    .filter((value) => value.metricName?.endsWith('_count') && value.labels.route === route)
    .reduce((sum, value) => sum + value.value, 0);
}

/** Requests of a route the fast path has served, as /metrics reports them. */
async function servedFast(app: NestExpressApplication, route = LEASE_ROUTE): Promise<number> {
  const metric = await app.get(MetricsService).registry.getSingleMetric('leasehold_fast_path_requests_total')?.get();
  return (metric?.values ?? []).filter((value) => value.labels.route === route).reduce((sum, v) => sum + v.value, 0);
}

interface Caller {
  tenant: string;
  leaseId: string;
  token: string;
}

interface Case {
  name: string;
  status: number;
  /** The request line and headers, without Host and Connection. */
  head: (caller: Caller) => string;
  body?: Buffer | string;
  /** The lease lives in another tenant than the caller's. */
  foreign?: boolean;
  /** The lease has run out unrenewed. */
  expired?: boolean;
}

const post = (path: string, ...headers: string[]) => [`POST ${path} HTTP/1.1`, ...headers].join('\r\n');
const auth = (caller: Caller) => `Authorization: Bearer ${caller.token}`;
/** The caller's own lease, with the caller's token and these headers. */
const extendOwn = (caller: Caller, ...headers: string[]) =>
  post(`/api/v1/lease/${caller.leaseId}/extend`, auth(caller), ...headers);
const bearer = (claims: Record<string, unknown>, secret?: string) =>
  `Authorization: Bearer ${hsToken(claims, {}, secret)}`;
const json = (body: string) => [`Content-Type: application/json`, `Content-Length: ${Buffer.byteLength(body)}`];
const seconds90 = '{"seconds":90}';
const gzipped = gzipSync(seconds90);

const CASES: Case[] = [
  { name: 'a JSON body', status: 200, head: (c) => extendOwn(c, ...json(seconds90)), body: seconds90 },
  { name: 'no body at all', status: 200, head: (c) => extendOwn(c) },
  { name: 'an empty body', status: 200, head: (c) => extendOwn(c, 'Content-Length: 0') },
  { name: 'malformed JSON', status: 200, head: (c) => extendOwn(c, ...json('{"seconds":')), body: '{"seconds":' },
  {
    name: 'a byte-order mark',
    status: 200,
    head: (c) => extendOwn(c, ...json(`\uFEFF${seconds90}`)),
    body: `\uFEFF${seconds90}`,
  },
  {
    name: 'a text/plain body',
    status: 200,
    head: (c) => extendOwn(c, 'Content-Type: text/plain', `Content-Length: ${seconds90.length}`),
    body: seconds90,
  },
  {
    name: 'seconds below 1',
    status: 200,
    head: (c) => extendOwn(c, ...json('{"seconds":-5}')),
    body: '{"seconds":-5}',
  },
  {
    name: 'a gzip-encoded body',
    status: 200,
    head: (c) =>
      extendOwn(c, 'Content-Type: application/json', 'Content-Encoding: gzip', `Content-Length: ${gzipped.length}`),
    body: gzipped,
  },
  {
    name: 'a chunked body',
    status: 200,
    head: (c) => extendOwn(c, 'Content-Type: application/json', 'Transfer-Encoding: chunked'),
    body: `${seconds90.length.toString(16)}\r\n${seconds90}\r\n0\r\n\r\n`,
  },
  {
    name: 'a body over the limit',
    status: 413,
    head: (c) => extendOwn(c, ...json('x'.repeat(BODY_LIMIT + 1))),
    body: 'x'.repeat(BODY_LIMIT + 1),
  },
  {
    name: 'an unknown lease id',
    status: 200,
    head: (c) => post('/api/v1/lease/0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90/extend', auth(c), ...json(seconds90)),
    body: seconds90,
  },
  { name: 'an id that is not a UUID', status: 200, head: (c) => post('/api/v1/lease/not-a-lease/extend', auth(c)) },
  {
    name: 'an id whose encoding does not decode',
    status: 200,
    head: (c) => post('/api/v1/lease/%E0%A4%A/extend', auth(c)),
  },
  { name: 'an encoded slash in the id', status: 200, head: (c) => post('/api/v1/lease/a%2Fb/extend', auth(c)) },
  {
    name: 'an upper-case lease id',
    status: 200,
    head: (c) => post(`/api/v1/lease/${c.leaseId.toUpperCase()}/extend`, auth(c)),
  },
  { name: 'an upper-case path', status: 200, head: (c) => post(`/API/V1/LEASE/${c.leaseId}/EXTEND`, auth(c)) },
  {
    name: 'a trailing slash and a query',
    status: 200,
    head: (c) => post(`/api/v1/lease/${c.leaseId}/extend/?x=1`, auth(c)),
  },
  { name: "another tenant's lease", status: 200, foreign: true, head: (c) => extendOwn(c) },
  { name: 'an expired lease', status: 200, expired: true, head: (c) => extendOwn(c) },
  { name: "another tenant's expired lease", status: 200, foreign: true, expired: true, head: (c) => extendOwn(c) },
  { name: 'a request id of its own', status: 200, head: (c) => extendOwn(c, 'X-Request-Id: renewal-42') },
  { name: 'no token', status: 401, head: (c) => post(`/api/v1/lease/${c.leaseId}/extend`) },
  {
    name: 'a token signed with another key',
    status: 401,
    head: (c) =>
      post(
        `/api/v1/lease/${c.leaseId}/extend`,
        bearer({ role: 'read-write', tenant: c.tenant }, 'another-secret-of-enough-length'),
      ),
  },
  {
    name: 'a read-only role',
    status: 403,
    head: (c) => post(`/api/v1/lease/${c.leaseId}/extend`, bearer({ role: 'read-only', tenant: c.tenant })),
  },
  {
    name: 'a tenant header that contradicts the token',
    status: 403,
    head: (c) => extendOwn(c, `${TENANT_HEADER}: ${newTenant()}`),
  },
  {
    name: 'a malformed tenant header',
    status: 400,
    head: (c) =>
      post(
        `/api/v1/lease/${c.leaseId}/extend`,
        bearer({ role: 'read-write', tenant: c.tenant }),
        `${TENANT_HEADER}: not a tenant`,
      ),
  },
  {
    name: 'a token without a tenant claim',
    status: 403,
    head: (c) => post(`/api/v1/lease/${c.leaseId}/extend`, bearer({ role: 'read-write' })),
  },
  { name: 'an empty lease id', status: 404, head: (c) => post('/api/v1/lease//extend', auth(c)) },
  { name: 'GET', status: 404, head: (c) => [`GET /api/v1/lease/${c.leaseId}/extend HTTP/1.1`, auth(c)].join('\r\n') },
];

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/**
 * What must be identical between the two paths: the lease's own id aside,
 * and each timestamp read as whole seconds from the moment of the answer,
 * which is how long the renewal was for.
 */
/** The renewal length a hint of this many seconds can be the jittered share of, to the nearest 30 s. */
function renewalShareOf(hint: number): number {
  const fromMost = hint / RENEW_FRACTION;
  const fromLeast = hint / (RENEW_FRACTION * (1 - RENEW_JITTER));
  return Math.round((fromMost + fromLeast) / 2 / 30) * 30;
}

function comparable(response: WireResponse, caller: Caller): unknown {
  const { date: _date, 'x-request-id': requestId, 'leasehold-renew-after': renewAfter, ...headers } = response.headers;
  // The hint is jittered: compare what it is a share of (the renewal's length), not its value.
  if (renewAfter !== undefined) headers['leasehold-renew-after'] = `share of ${renewalShareOf(Number(renewAfter))} s`;
  const body = response.body
    .split(caller.leaseId)
    .join('<lease>')
    .split(caller.leaseId.toUpperCase())
    .join('<LEASE>')
    // The database's instant against this process's receipt: on a busy machine seconds apart, so to the nearest 5 s.
    .replace(/"(\d{4}-\d{2}-\d{2}T[\d:.]+Z)"/g, (_match, timestamp: string) => {
      return `"now + ${Math.round((Date.parse(timestamp) - response.receivedAt) / 5_000) * 5} s"`;
    });
  return {
    status: response.status,
    headers,
    body,
    requestId: requestId === 'renewal-42' ? requestId : typeof requestId,
  };
}

interface BothPaths {
  fast: NestExpressApplication;
  routed: NestExpressApplication;
}

/** The application twice, with the fast path and without it, for the describe block that calls this. */
function bothPaths(env: Record<string, string> = ENV): BothPaths {
  const apps = {} as BothPaths;
  // One after the other: on the embedded database, statements of two applications racing each other can
  // interleave (see DatabaseEngine).
  beforeAll(async () => {
    apps.fast = await createTestApp(env);
    apps.routed = await createTestApp(env, { fastPath: false });
  });

  afterAll(async () => {
    await apps.fast.close();
    await apps.routed.close();
  });

  afterEach(() => {
    jest.restoreAllMocks();
  });
  return apps;
}

/** The same request to both applications: the fast path's answer has `status` and is the router's, as `comparable` sees them. */
async function expectRoutersAnswer(
  apps: BothPaths,
  status: number,
  answer: (app: NestExpressApplication) => Promise<WireResponse>,
  comparable: (response: WireResponse) => unknown = comparableMasked,
): Promise<void> {
  const fastResponse = await answer(apps.fast);
  const routedResponse = await answer(apps.routed);

  expect(fastResponse.status).toBe(status);
  expect(comparable(fastResponse)).toEqual(comparable(routedResponse));
}

describe('lease route served ahead of the router', () => {
  const apps = bothPaths();
  let dataSource: Database;

  beforeAll(() => {
    dataSource = apps.fast.get(Database);
  });

  async function caller(app: NestExpressApplication, foreign = false, expired = false): Promise<Caller> {
    const tenant = newTenant();
    const owner = foreign ? newTenant() : tenant;
    const lease = await createLease(app, owner, [30]);
    if (expired) await expireLeases(dataSource, owner, lease.leaseId);
    return { tenant, leaseId: lease.leaseId, token: hsToken({ role: 'read-write', tenant }) };
  }

  it('serves lease requests itself, through the application global guards and exception filter', async () => {
    const guard = jest.spyOn(AccessGuard.prototype, 'canActivate');
    const throttle = jest.spyOn(TenantThrottlerGuard.prototype, 'canActivate');
    const filter = jest.spyOn(HttpExceptionFilter.prototype, 'catch');
    const logged = jest.spyOn(Logger.prototype, 'error');
    const c = await caller(apps.fast);
    const timedBefore = await requestsTimed(apps.fast);
    const servedBefore = await servedFast(apps.fast);

    const response = await onTheWire(apps.fast, extendOwn(c));
    const refused = await onTheWire(apps.fast, post(`/api/v1/lease/${c.leaseId}/extend`));

    expect(response.status).toBe(200);
    expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect((await requestsTimed(apps.fast)) - timedBefore).toBe(2);
    expect(JSON.parse(response.body)).toMatchObject({ leaseId: c.leaseId, success: true, renewed: 1 });
    expect(refused.status).toBe(401);
    expect((await servedFast(apps.fast)) - servedBefore).toBe(2);
    expect(guard).toHaveBeenCalledTimes(2);
    expect(throttle).toHaveBeenCalledTimes(1);
    expect(filter).toHaveBeenCalledTimes(1);
    // A refusal the filter answered is not an error of the broker's.
    expect(logged).not.toHaveBeenCalled();
  });

  it('reads the fast routes from their handlers at start-up', () => {
    const routes = apps.fast.get(FastRouteTable).routes.map((route) => `${route.method} ${route.path} ${route.name}`);

    expect(routes.sort()).toEqual([
      'GET /api/v1/pop/queue/:queue PopController.popQueue',
      'GET /api/v1/pop/queue/:queue/partition/:partition PopController.popPartition',
      'POST /api/v1/ack AckController.ack',
      'POST /api/v1/ack/batch AckController.ackBatch',
      'POST /api/v1/lease/:leaseId/extend LeaseController.extend',
      'POST /api/v1/push PushController.push',
      'POST /api/v1/transaction TransactionController.commit',
      'POST /streams/v1/cycle StreamsController.cycle',
      'POST /streams/v1/state/get StreamsController.state',
    ]);
  });

  it('leaves the route to the router when turned off', async () => {
    const c = await caller(apps.routed);

    const response = await onTheWire(apps.routed, extendOwn(c));

    expect(response.status).toBe(200);
    expect(await servedFast(apps.routed)).toBe(0);
    expect(apps.routed.get(FastPathMiddleware).routes).toEqual([]);
  });

  it.each(CASES.map((testCase) => [testCase.name, testCase] as const))(
    'answers %s exactly as the router does',
    async (_name, testCase) => {
      const fastCaller = await caller(apps.fast, testCase.foreign, testCase.expired);
      const routedCaller = await caller(apps.routed, testCase.foreign, testCase.expired);

      const fastResponse = await onTheWire(apps.fast, testCase.head(fastCaller), testCase.body);
      const routedResponse = await onTheWire(apps.routed, testCase.head(routedCaller), testCase.body);

      expect(fastResponse.status).toBe(testCase.status);
      expect(comparable(fastResponse, fastCaller)).toEqual(comparable(routedResponse, routedCaller));
    },
  );

  it('renews what each body asks for, as the router does', async () => {
    const c = await caller(apps.fast);

    const response = await onTheWire(apps.fast, extendOwn(c, ...json('{"seconds":3600}')), '{"seconds":3600}');

    const body = JSON.parse(response.body) as { newExpiresAt: string };
    expect(body.newExpiresAt).toMatch(TIMESTAMP);
    const secondsLeft = (Date.parse(body.newExpiresAt) - Date.now()) / 1000;
    expect(secondsLeft).toBeGreaterThan(3500);
    expect(secondsLeft).toBeLessThanOrEqual(3600);
  });

  it('renews nothing for a request whose client goes away before its body arrives', async () => {
    const tenant = newTenant();
    const lease = await createLease(apps.fast, tenant, [30]);
    const before = await expiries(dataSource, tenant, lease.partitionIds);
    const server = apps.fast.getHttpServer();
    if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;

    await new Promise<void>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          [
            `POST /api/v1/lease/${lease.leaseId}/extend HTTP/1.1`,
            'Host: leasehold',
            `Authorization: Bearer ${hsToken({ role: 'read-write', tenant })}`,
            'Content-Type: application/json',
            'Content-Length: 100',
            '',
            '{"seconds":',
          ].join('\r\n'),
          () => socket.destroy(),
        );
      });
      socket.on('close', () => resolve());
    });
    await sleep(200);

    expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual(before);
  });
});

interface PushCase {
  name: string;
  status: number;
  head: (token: string) => string;
  body?: Buffer | string;
  /** Sent twice; the second answer is compared. */
  twice?: boolean;
}

const pushBody = (items: unknown) => JSON.stringify({ items });
const twoItems = pushBody([
  { queue: 'fast-push', payload: { n: 1 } },
  { queue: 'fast-push', partition: 'p2', transactionId: 'order-7', payload: 'two' },
]);
const gzippedPush = gzipSync(twoItems);
const pushAs = (token: string, path = '/api/v1/push', ...headers: string[]) =>
  post(path, `Authorization: Bearer ${token}`, ...headers);

const PUSH_CASES: PushCase[] = [
  { name: 'two items', status: 201, head: (t) => pushAs(t, undefined, ...json(twoItems)), body: twoItems },
  {
    name: 'a transactionId already stored',
    status: 201,
    twice: true,
    head: (t) => pushAs(t, undefined, ...json(twoItems)),
    body: twoItems,
  },
  {
    name: 'an upper-case path with a trailing slash and a query',
    status: 201,
    head: (t) => pushAs(t, '/API/V1/PUSH/?x=1', ...json(twoItems)),
    body: twoItems,
  },
  {
    name: 'a gzip-encoded body',
    status: 201,
    head: (t) =>
      pushAs(
        t,
        undefined,
        'Content-Type: application/json',
        'Content-Encoding: gzip',
        `Content-Length: ${gzippedPush.length}`,
      ),
    body: gzippedPush,
  },
  {
    name: 'a chunked body',
    status: 201,
    head: (t) => pushAs(t, undefined, 'Content-Type: application/json', 'Transfer-Encoding: chunked'),
    body: `${Buffer.byteLength(twoItems).toString(16)}\r\n${twoItems}\r\n0\r\n\r\n`,
  },
  {
    name: 'a byte-order mark',
    status: 201,
    head: (t) => pushAs(t, undefined, ...json(`\uFEFF${twoItems}`)),
    body: `\uFEFF${twoItems}`,
  },
  {
    name: 'an item without a payload',
    status: 400,
    head: (t) => pushAs(t, undefined, ...json(pushBody([{ queue: 'fast-push' }]))),
    body: pushBody([{ queue: 'fast-push' }]),
  },
  {
    name: 'items that are not an array',
    status: 400,
    head: (t) => pushAs(t, undefined, ...json('{"items":3}')),
    body: '{"items":3}',
  },
  {
    name: 'malformed JSON',
    status: 400,
    head: (t) => pushAs(t, undefined, ...json('{"items":[')),
    body: '{"items":[',
  },
  {
    name: 'a text/plain body',
    status: 400,
    head: (t) => pushAs(t, undefined, 'Content-Type: text/plain', `Content-Length: ${Buffer.byteLength(twoItems)}`),
    body: twoItems,
  },
  { name: 'no body at all', status: 400, head: (t) => pushAs(t) },
  {
    name: 'an unsupported content-encoding',
    status: 415,
    head: (t) =>
      pushAs(
        t,
        undefined,
        'Content-Type: application/json',
        'Content-Encoding: zstd',
        `Content-Length: ${twoItems.length}`,
      ),
    body: twoItems,
  },
  {
    name: 'a body over the limit',
    status: 413,
    head: (t) => pushAs(t, undefined, ...json('x'.repeat(BODY_LIMIT + 1))),
    body: 'x'.repeat(BODY_LIMIT + 1),
  },
  { name: 'no token', status: 401, head: () => post('/api/v1/push', ...json(twoItems)), body: twoItems },
  {
    name: 'a read-only role',
    status: 403,
    head: () => post('/api/v1/push', bearer({ role: 'read-only', tenant: newTenant() }), ...json(twoItems)),
    body: twoItems,
  },
  { name: 'GET', status: 404, head: (t) => [`GET /api/v1/push HTTP/1.1`, `Authorization: Bearer ${t}`].join('\r\n') },
];

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** Status, headers and body, ids masked. */
function comparableMasked(response: WireResponse): unknown {
  const { date: _date, 'x-request-id': _requestId, ...headers } = response.headers;
  return { status: response.status, headers, body: response.body.replace(UUID, '<uuid>') };
}

describe('push route served ahead of the router', () => {
  const apps = bothPaths();

  const writer = () => hsToken({ role: 'read-write', tenant: newTenant() });

  it('serves pushes itself, through the global guards, its pipes and the exception filter', async () => {
    const guard = jest.spyOn(AccessGuard.prototype, 'canActivate');
    const filter = jest.spyOn(HttpExceptionFilter.prototype, 'catch');
    const timedBefore = await requestsTimed(apps.fast, PUSH_ROUTE);
    const servedBefore = await servedFast(apps.fast, PUSH_ROUTE);

    const stored = await onTheWire(apps.fast, pushAs(writer(), undefined, ...json(twoItems)), twoItems);
    const refused = await onTheWire(apps.fast, pushAs(writer(), undefined, ...json('{"items":3}')), '{"items":3}');

    expect(stored.status).toBe(201);
    expect(JSON.parse(stored.body)).toMatchObject([
      { index: 0, status: 'queued' },
      { index: 1, status: 'queued', transaction_id: 'order-7' },
    ]);
    expect(refused.status).toBe(400);
    expect((await servedFast(apps.fast, PUSH_ROUTE)) - servedBefore).toBe(2);
    expect(guard).toHaveBeenCalledTimes(2);
    expect(filter).toHaveBeenCalledTimes(1);
    expect((await requestsTimed(apps.fast, PUSH_ROUTE)) - timedBefore).toBe(2);
  });

  it('stores each payload as it was written, minified, on either path', async () => {
    const body = `{"items": ${sentItems('texts', 'p')}}`;

    for (const app of [apps.fast, apps.routed]) {
      const tenant = newTenant();
      const pushed = await onTheWire(
        app,
        pushAs(hsToken({ role: 'read-write', tenant }), undefined, ...json(body)),
        body,
      );
      const stored: Array<{ payload: string }> = await app
        .get(Database)
        .query('SELECT payload::text AS payload FROM messages WHERE tenant_id = $1 ORDER BY seq', [tenant]);

      expect(pushed.status).toBe(201);
      expect(stored.map((row) => row.payload)).toEqual(SENT_PAYLOADS.map((payload) => payload.stored));
    }
  });

  it.each(PUSH_CASES.map((testCase) => [testCase.name, testCase] as const))(
    'answers %s exactly as the router does',
    async (_name, testCase) => {
      const answer = async (app: NestExpressApplication) => {
        const token = writer();
        if (testCase.twice) await onTheWire(app, testCase.head(token), testCase.body);
        return onTheWire(app, testCase.head(token), testCase.body);
      };

      await expectRoutersAnswer(apps, testCase.status, answer);
    },
  );
});

interface AckCase {
  name: string;
  status: number;
  head: (token: string, body: string) => string;
  body: (lease: FixtureLease) => string;
}

const ackBody = (lease: FixtureLease, overrides: Record<string, unknown> = {}) =>
  JSON.stringify({
    transactionId: lease.messages[0].transactionId,
    partitionId: lease.messages[0].partitionId,
    leaseId: lease.leaseId,
    status: 'completed',
    ...overrides,
  });
const ackBatchBody = (lease: FixtureLease) =>
  JSON.stringify({
    acknowledgments: lease.messages.map((message) => ({ ...message, leaseId: lease.leaseId, status: 'completed' })),
  });
const ackAs = (path: string) => (token: string, body: string) =>
  post(path, `Authorization: Bearer ${token}`, ...json(body));

const ACK_CASES: AckCase[] = [
  { name: 'an ack', status: 200, head: ackAs('/api/v1/ack'), body: (l) => ackBody(l) },
  { name: 'a batch', status: 200, head: ackAs('/api/v1/ack/batch'), body: ackBatchBody },
  { name: 'a failed ack', status: 200, head: ackAs('/api/v1/ack'), body: (l) => ackBody(l, { status: 'failed' }) },
  {
    name: 'another lease id',
    status: 200,
    head: ackAs('/api/v1/ack'),
    body: (l) => ackBody(l, { leaseId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' }),
  },
  {
    name: 'an upper-case batch path with a trailing slash',
    status: 200,
    head: ackAs('/API/V1/ACK/BATCH/'),
    body: ackBatchBody,
  },
  {
    name: 'no partitionId',
    status: 400,
    head: ackAs('/api/v1/ack'),
    body: (l) => ackBody(l, { partitionId: undefined }),
  },
  {
    name: 'acknowledgments that are not an array',
    status: 400,
    head: ackAs('/api/v1/ack/batch'),
    body: () => '{"acknowledgments":1}',
  },
  { name: 'malformed JSON', status: 400, head: ackAs('/api/v1/ack'), body: () => '{"transactionId":' },
  {
    name: 'a text/plain body',
    status: 400,
    head: (token, body) =>
      post(
        '/api/v1/ack',
        `Authorization: Bearer ${token}`,
        'Content-Type: text/plain',
        `Content-Length: ${body.length}`,
      ),
    body: (l) => ackBody(l),
  },
  {
    name: 'no token',
    status: 401,
    head: (_token, body) => post('/api/v1/ack', ...json(body)),
    body: (l) => ackBody(l),
  },
  {
    name: 'a read-only role',
    status: 403,
    head: (_token, body) =>
      post('/api/v1/ack/batch', bearer({ role: 'read-only', tenant: newTenant() }), ...json(body)),
    body: ackBatchBody,
  },
  {
    name: 'GET',
    status: 404,
    head: (token) => [`GET /api/v1/ack HTTP/1.1`, `Authorization: Bearer ${token}`].join('\r\n'),
    body: () => '',
  },
];

describe('ack routes served ahead of the router', () => {
  const apps = bothPaths();

  async function leaseIn(app: NestExpressApplication): Promise<{ token: string; lease: FixtureLease }> {
    const tenant = newTenant();
    return { token: hsToken({ role: 'read-write', tenant }), lease: await createLease(app, tenant, [30, 30]) };
  }

  it('serves acks itself and times them under their routes', async () => {
    const { token, lease } = await leaseIn(apps.fast);
    const timedBefore = await requestsTimed(apps.fast, ACK_BATCH_ROUTE);
    const servedBefore = await servedFast(apps.fast, ACK_BATCH_ROUTE);

    const response = await onTheWire(
      apps.fast,
      ackAs('/api/v1/ack/batch')(token, ackBatchBody(lease)),
      ackBatchBody(lease),
    );

    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toMatchObject([
      { index: 0, success: true },
      { index: 1, success: true, leaseReleased: true },
    ]);
    expect((await servedFast(apps.fast, ACK_BATCH_ROUTE)) - servedBefore).toBe(1);
    expect((await requestsTimed(apps.fast, ACK_BATCH_ROUTE)) - timedBefore).toBe(1);
  });

  it.each(ACK_CASES.map((testCase) => [testCase.name, testCase] as const))(
    'answers %s exactly as the router does',
    async (_name, testCase) => {
      const answer = async (app: NestExpressApplication) => {
        const { token, lease } = await leaseIn(app);
        const body = testCase.body(lease);
        return onTheWire(app, testCase.head(token, body), body);
      };

      await expectRoutersAnswer(apps, testCase.status, answer);
    },
  );
});

interface PopCase {
  name: string;
  status: number;
  /** The request line and headers, for a tenant whose queue `fast-pop` holds a message in `p0`, `p1` and `a/b`. */
  head: (token: string) => string;
  body?: string;
}

const get = (path: string, ...headers: string[]) => [`GET ${path} HTTP/1.1`, ...headers].join('\r\n');
const popAs = (path: string) => (token: string) => get(path, `Authorization: Bearer ${token}`);

const bigBody = `{"x":"${'y'.repeat(65 * 1024)}"}`;

const POP_CASES: PopCase[] = [
  { name: 'a pop from any partition', status: 200, head: popAs('/api/v1/pop/queue/fast-pop?batch=10&partitions=3') },
  { name: 'a pop from one partition', status: 200, head: popAs('/api/v1/pop/queue/fast-pop/partition/p1') },
  { name: 'an encoded slash in the partition', status: 200, head: popAs('/api/v1/pop/queue/fast-pop/partition/a%2Fb') },
  {
    name: 'an upper-case path with a trailing slash',
    status: 200,
    head: popAs('/API/V1/POP/QUEUE/fast-pop/PARTITION/p1/?batch=2'),
  },
  {
    name: 'a consumer group',
    status: 200,
    head: popAs('/api/v1/pop/queue/fast-pop?consumerGroup=g1&batch=5&partitions=3'),
  },
  { name: 'autoAck', status: 200, head: popAs('/api/v1/pop/queue/fast-pop/partition/p0?autoAck=true') },
  { name: 'a partition named in another case', status: 204, head: popAs('/api/v1/pop/queue/fast-pop/partition/P1') },
  { name: 'a queue that does not exist', status: 204, head: popAs('/api/v1/pop/queue/nothing-here') },
  { name: 'a partition that holds nothing', status: 204, head: popAs('/api/v1/pop/queue/fast-pop/partition/p9') },
  { name: 'a wait that times out', status: 204, head: popAs('/api/v1/pop/queue/nothing-here?wait=true&timeout=50') },
  { name: 'a batch that is not a number', status: 400, head: popAs('/api/v1/pop/queue/fast-pop?batch=ten') },
  { name: 'a repeated parameter', status: 400, head: popAs('/api/v1/pop/queue/fast-pop?batch=1&batch=2') },
  { name: 'a queue name too long', status: 400, head: popAs(`/api/v1/pop/queue/${'q'.repeat(256)}`) },
  { name: 'a segment that does not decode', status: 400, head: popAs('/api/v1/pop/queue/%E0%A4%A') },
  {
    name: 'a body over the 64 KiB of a route that takes none',
    status: 413,
    head: (t) => get('/api/v1/pop/queue/fast-pop', `Authorization: Bearer ${t}`, ...json(bigBody)),
    body: bigBody,
  },
  {
    name: 'a malformed JSON body',
    status: 400,
    head: (t) => get('/api/v1/pop/queue/fast-pop', `Authorization: Bearer ${t}`, ...json('{"x":')),
    body: '{"x":',
  },
  {
    name: 'a small JSON body with a key, refused by name',
    status: 400,
    head: (t) => get('/api/v1/pop/queue/fast-pop/partition/p0', `Authorization: Bearer ${t}`, ...json('{"x":1}')),
    body: '{"x":1}',
  },
  {
    name: 'an empty JSON object for a body, ignored',
    status: 200,
    head: (t) => get('/api/v1/pop/queue/fast-pop/partition/p0', `Authorization: Bearer ${t}`, ...json('{}')),
    body: '{}',
  },
  {
    name: 'a misspelt query parameter, refused by name',
    status: 400,
    head: (t) => get('/api/v1/pop/queue/fast-pop/partition/p0?bacth=1', `Authorization: Bearer ${t}`),
  },
  { name: 'no token', status: 401, head: () => get('/api/v1/pop/queue/fast-pop') },
  {
    name: 'a read-only role',
    status: 403,
    head: () => get('/api/v1/pop/queue/fast-pop', bearer({ role: 'read-only', tenant: newTenant() })),
  },
  {
    name: 'HEAD',
    status: 405,
    head: (t) => [`HEAD /api/v1/pop/queue/fast-pop HTTP/1.1`, `Authorization: Bearer ${t}`].join('\r\n'),
  },
  { name: 'POST', status: 404, head: (t) => post('/api/v1/pop/queue/fast-pop', `Authorization: Bearer ${t}`) },
];

const TIMESTAMPS = /\d{4}-\d{2}-\d{2}T[\d:.]+Z/g;

interface PopAnswer {
  partition?: string;
  messages?: Array<{ transactionId: string }>;
  claimedPartitions?: Array<{ partition: string }>;
}

/**
 * As comparableMasked, with timestamps masked too and the length checked against the body instead of compared. The
 * database picks the order of the partitions one pop claims, so an answer from several is compared in a fixed order.
 */
function comparablePop(response: WireResponse): unknown {
  const { date: _date, 'x-request-id': _requestId, 'content-length': length, ...headers } = response.headers;
  const masked = response.body.replace(UUID, '<uuid>').replace(TIMESTAMPS, '<time>');
  const answer = (masked.startsWith('{"success"') ? JSON.parse(masked) : undefined) as PopAnswer | undefined;
  const claimed = answer?.claimedPartitions?.length ?? 0;
  return {
    status: response.status,
    headers,
    lengthMatches: length === undefined || Number(length) === Buffer.byteLength(response.body),
    body:
      answer && claimed > 1
        ? {
            ...answer,
            partition: `one of ${claimed}`,
            messages: answer.messages?.sort((a, b) => a.transactionId.localeCompare(b.transactionId)),
            claimedPartitions: answer.claimedPartitions?.sort((a, b) => a.partition.localeCompare(b.partition)),
          }
        : masked,
  };
}

describe('pop routes served ahead of the router', () => {
  const apps = bothPaths();

  async function tenantWithMessages(app: NestExpressApplication): Promise<string> {
    const tenant = newTenant();
    await app.get(PushService).push(
      tenant,
      undefined,
      ['p0', 'p1', 'a/b'].map((partition, index) => ({
        queue: 'fast-pop',
        partition,
        payloadJson: JSON.stringify({ index }),
        transactionId: `order-${index}`,
        traceId: undefined,
      })),
    );
    return hsToken({ role: 'read-write', tenant });
  }

  it('serves pops itself, answers 204 when nothing is there, and times both under their routes', async () => {
    const token = await tenantWithMessages(apps.fast);
    const timedBefore = await requestsTimed(apps.fast, POP_PARTITION_ROUTE);
    const servedBefore = await servedFast(apps.fast, POP_PARTITION_ROUTE);

    const claimed = await onTheWire(apps.fast, popAs('/api/v1/pop/queue/fast-pop/partition/a%2Fb')(token));
    const empty = await onTheWire(apps.fast, popAs('/api/v1/pop/queue/fast-pop/partition/a%2Fb')(token));

    expect(claimed.status).toBe(200);
    expect(JSON.parse(claimed.body)).toMatchObject({ partition: 'a/b', messages: [{ data: { index: 2 } }] });
    expect(empty.status).toBe(204);
    expect(empty.body).toBe('');
    expect((await servedFast(apps.fast, POP_PARTITION_ROUTE)) - servedBefore).toBe(2);
    expect((await requestsTimed(apps.fast, POP_PARTITION_ROUTE)) - timedBefore).toBe(2);
  });

  it.each(['fast', 'routed'] as const)(
    'parks a poll on the %s path with its route call returned, and answers it when a push comes',
    async (path) => {
      const app = apps[path];
      const tenant = newTenant();
      const parks = jest.spyOn(app.get(PopService), 'popOrPark');
      const answer = onTheWire(
        app,
        popAs('/api/v1/pop/queue/parked-pop?wait=true&timeout=60000')(hsToken({ role: 'read-write', tenant })),
      );
      await waitFor(() => parks.mock.results.length > 0, 'the poll reached the route');

      // The route's call is over while the poll waits: nothing between the router and the wait is suspended.
      expect(await (parks.mock.results[0].value as Promise<unknown>)).toBeInstanceOf(LaterAnswer);
      await app
        .get(PushService)
        .push(tenant, undefined, [
          { queue: 'parked-pop', partition: 'p', payloadJson: '{"n":1}', transactionId: 'woken', traceId: undefined },
        ]);

      const response = await answer;
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toMatchObject({ messages: [{ transactionId: 'woken' }] });
    },
  );

  it.each(POP_CASES.map((testCase) => [testCase.name, testCase] as const))(
    'answers %s exactly as the router does',
    async (_name, testCase) => {
      const answer = async (app: NestExpressApplication) =>
        onTheWire(app, testCase.head(await tenantWithMessages(app)), testCase.body);

      await expectRoutersAnswer(apps, testCase.status, answer, comparablePop);
    },
  );
});

const TRANSACTION_ROUTE = '/api/v1/transaction';
const pushTransaction = JSON.stringify({ operations: [{ type: 'push', items: [{ queue: 'tx', payload: { n: 1 } }] }] });
const transactionAs = (token: string, body: string) => post('/api/v1/transaction', withToken(token), ...json(body));

/** A stage's transaction (ack its input under the required lease, push its output), and ways to get one wrong. */
const TRANSACTION_CASES: Array<{ name: string; status: number; body: (lease: FixtureLease) => string }> = [
  {
    name: 'an ack and a push under the required lease',
    status: 200,
    body: (l) =>
      JSON.stringify({
        operations: [
          { type: 'ack', ...l.messages[0], leaseId: l.leaseId, status: 'completed' },
          { type: 'push', items: [{ queue: 'tx-out', transactionId: 'out-1', payload: { n: 1 } }] },
        ],
        requiredLeases: [l.leaseId],
      }),
  },
  {
    name: 'a lease that is not held (rolled back)',
    status: 200,
    body: (l) =>
      JSON.stringify({
        operations: [{ type: 'ack', ...l.messages[0], leaseId: UNKNOWN_LEASE, status: 'completed' }],
        requiredLeases: [UNKNOWN_LEASE],
      }),
  },
  { name: 'an unknown operation type (rolled back)', status: 200, body: () => '{"operations":[{"type":"merge"}]}' },
  { name: 'no operations', status: 400, body: () => '{"operations":[]}' },
  { name: 'malformed JSON', status: 400, body: () => '{"operations":' },
];

describe('transaction route served ahead of the router', () => {
  const apps = bothPaths();

  async function leaseIn(app: NestExpressApplication): Promise<{ token: string; lease: FixtureLease }> {
    const tenant = newTenant();
    return { token: hsToken({ role: 'read-write', tenant }), lease: await createLease(app, tenant, [30]) };
  }

  it('serves transactions itself and times them under their route', async () => {
    const { token, lease } = await leaseIn(apps.fast);
    const timedBefore = await requestsTimed(apps.fast, TRANSACTION_ROUTE);
    const servedBefore = await servedFast(apps.fast, TRANSACTION_ROUTE);

    const committed = await onTheWire(
      apps.fast,
      transactionAs(token, TRANSACTION_CASES[0].body(lease)),
      TRANSACTION_CASES[0].body(lease),
    );

    expect(committed.status).toBe(200);
    expect(JSON.parse(committed.body)).toMatchObject({
      success: true,
      results: [{ type: 'ack', success: true }, { type: 'push' }],
    });
    expect((await servedFast(apps.fast, TRANSACTION_ROUTE)) - servedBefore).toBe(1);
    expect((await requestsTimed(apps.fast, TRANSACTION_ROUTE)) - timedBefore).toBe(1);
  });

  it.each(TRANSACTION_CASES.map((testCase) => [testCase.name, testCase] as const))(
    'answers %s exactly as the router does',
    async (_name, testCase) => {
      const answer = async (app: NestExpressApplication) => {
        const { token, lease } = await leaseIn(app);
        const body = testCase.body(lease);
        return onTheWire(app, transactionAs(token, body), body);
      };

      await expectRoutersAnswer(apps, testCase.status, answer);
    },
  );
});

const CYCLE_ROUTE = '/streams/v1/cycle';
const STATE_ROUTE = '/streams/v1/state/get';
const streamAs = (path: string) => (token: string, body: string) => post(path, withToken(token), ...json(body));

/** A stream query registered on the queue of a live lease, as the SDK's runner holds one between a pop and its cycle. */
interface StreamFixture {
  token: string;
  queryId: string;
  lease: FixtureLease;
}

async function streamFixture(app: NestExpressApplication): Promise<StreamFixture> {
  const tenant = newTenant();
  const lease = await createLease(app, tenant, [30]);
  const registered = await app.get(StreamsService).register(
    tenant,
    Object.assign(new RegisterQueryDto(), {
      name: `sum-${lease.queue}`,
      source_queue: lease.queue,
      config_hash: 'h',
    }),
  );
  return { token: hsToken({ role: 'read-write', tenant }), queryId: registered.query_id, lease };
}

/** A cycle's and a state read's answers name the query, the partition and new message ids: each test makes its own. */
function comparableStream(response: WireResponse): unknown {
  const { date: _date, 'x-request-id': _requestId, 'content-length': _length, ...headers } = response.headers;
  return {
    status: response.status,
    headers,
    body: response.body.replace(UUID, '<uuid>').replace(TIMESTAMPS, '<time>'),
  };
}

/** The SDK's cycle for a running sum: the sum's state, the pushes, and the ack of the batch under `leaseId`. */
const sumCycle = (f: StreamFixture, leaseId: string, pushItems: unknown[] = []) =>
  JSON.stringify({
    query_id: f.queryId,
    partition_id: f.lease.partitionIds[0],
    state_ops: [{ type: 'upsert', key: 'sum', value: { sum: 1 } }],
    push_items: pushItems,
    ack: { transactionId: f.lease.messages[0].transactionId, leaseId },
  });

const STREAM_CASES: Array<{ name: string; status: number; path: string; body: (f: StreamFixture) => string }> = [
  {
    name: 'a cycle of a state write, a push and the ack under the live lease',
    status: 200,
    path: CYCLE_ROUTE,
    body: (f) => sumCycle(f, f.lease.leaseId, [{ queue: 'stream-out', partition: 'p', payload: { sum: 1 } }]),
  },
  {
    name: 'a cycle under a lease that is not held (409, nothing applied)',
    status: 409,
    path: CYCLE_ROUTE,
    body: (f) => sumCycle(f, UNKNOWN_LEASE),
  },
  {
    name: 'a cycle of an unknown query',
    status: 404,
    path: CYCLE_ROUTE,
    body: (f) => JSON.stringify({ query_id: UNKNOWN_LEASE, partition_id: f.lease.partitionIds[0] }),
  },
  {
    name: 'a cycle whose partition_id is no UUID',
    status: 400,
    path: CYCLE_ROUTE,
    body: (f) => JSON.stringify({ query_id: f.queryId, partition_id: 'p' }),
  },
  { name: 'a cycle of malformed JSON', status: 400, path: CYCLE_ROUTE, body: () => '{"query_id":' },
  {
    name: "a state read of the query's partition",
    status: 200,
    path: STATE_ROUTE,
    body: (f) => JSON.stringify({ query_id: f.queryId, partition_id: f.lease.partitionIds[0], keys: [] }),
  },
  {
    name: 'a state read of an unknown query',
    status: 404,
    path: STATE_ROUTE,
    body: (f) => JSON.stringify({ query_id: UNKNOWN_LEASE, partition_id: f.lease.partitionIds[0] }),
  },
  { name: 'a state read of malformed JSON', status: 400, path: STATE_ROUTE, body: () => '{"query_id":' },
];

describe('stream routes served ahead of the router', () => {
  const apps = bothPaths();

  it('serves cycles and state reads itself and times them under their routes', async () => {
    const fixture = await streamFixture(apps.fast);
    const before = await Promise.all([CYCLE_ROUTE, STATE_ROUTE].map((route) => servedFast(apps.fast, route)));
    const timedBefore = await requestsTimed(apps.fast, CYCLE_ROUTE);

    for (const testCase of [STREAM_CASES[5], STREAM_CASES[0]]) {
      const body = testCase.body(fixture);
      const answer = await onTheWire(apps.fast, streamAs(testCase.path)(fixture.token, body), body);
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toMatchObject({ success: true });
    }

    const after = await Promise.all([CYCLE_ROUTE, STATE_ROUTE].map((route) => servedFast(apps.fast, route)));
    expect(after.map((served, index) => served - before[index])).toEqual([1, 1]);
    expect((await requestsTimed(apps.fast, CYCLE_ROUTE)) - timedBefore).toBe(1);
  });

  it.each(STREAM_CASES.map((testCase) => [testCase.name, testCase] as const))(
    'answers %s exactly as the router does',
    async (_name, testCase) => {
      const answer = async (app: NestExpressApplication) => {
        const fixture = await streamFixture(app);
        const body = testCase.body(fixture);
        return onTheWire(app, streamAs(testCase.path)(fixture.token, body), body);
      };

      await expectRoutersAnswer(apps, testCase.status, answer, comparableStream);
    },
  );
});

interface RouteRequest {
  name: string;
  head: (token: string) => string;
  body?: string;
}

const UNKNOWN_LEASE = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const unknownAck = JSON.stringify({
  transactionId: 'order-1',
  partitionId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91',
  leaseId: UNKNOWN_LEASE,
  status: 'completed',
});
const unknownCycle = JSON.stringify({ query_id: UNKNOWN_LEASE, partition_id: UNKNOWN_LEASE });
const unknownAckBatch = JSON.stringify({ acknowledgments: [JSON.parse(unknownAck) as unknown] });
const withToken = (token: string) => `Authorization: Bearer ${token}`;

/** One request of each fast route, for a tenant with nothing stored. */
const EVERY_FAST_ROUTE: RouteRequest[] = [
  {
    name: 'an extend',
    head: (t) => post(`/api/v1/lease/${UNKNOWN_LEASE}/extend`, withToken(t), ...json(seconds90)),
    body: seconds90,
  },
  { name: 'a push', head: (t) => post('/api/v1/push', withToken(t), ...json(twoItems)), body: twoItems },
  { name: 'an ack', head: (t) => post('/api/v1/ack', withToken(t), ...json(unknownAck)), body: unknownAck },
  {
    name: 'an ack batch',
    head: (t) => post('/api/v1/ack/batch', withToken(t), ...json(unknownAckBatch)),
    body: unknownAckBatch,
  },
  { name: 'a pop from a queue', head: (t) => get('/api/v1/pop/queue/limits', withToken(t)) },
  { name: 'a pop from a partition', head: (t) => get('/api/v1/pop/queue/limits/partition/p0', withToken(t)) },
  {
    name: 'a transaction',
    head: (t) => post('/api/v1/transaction', withToken(t), ...json(pushTransaction)),
    body: pushTransaction,
  },
  { name: 'a stream cycle', head: (t) => streamAs(CYCLE_ROUTE)(t, unknownCycle), body: unknownCycle },
  { name: 'a stream state read', head: (t) => streamAs(STATE_ROUTE)(t, unknownCycle), body: unknownCycle },
];

const routeRows = (rows: RouteRequest[]) => rows.map((row) => [row.name, row] as const);

describe('fast routes over their rate limit', () => {
  const apps = bothPaths({ ...ENV, RATE_LIMIT_RENEW: '1', RATE_LIMIT_PRODUCE: '1', RATE_LIMIT_CONSUME: '1' });

  it.each(routeRows(EVERY_FAST_ROUTE))('answer 429 to %s exactly as the router does', async (_name, row) => {
    const answer = async (app: NestExpressApplication) => {
      const token = hsToken({ role: 'read-write', tenant: newTenant() });
      await onTheWire(app, row.head(token), row.body);
      return onTheWire(app, row.head(token), row.body);
    };

    await expectRoutersAnswer(apps, 429, answer);
  });
});

describe('fast routes when no database connection is free', () => {
  const apps = bothPaths({ ...ENV, DB_POOL_SIZE: '1', DB_ACQUIRE_TIMEOUT_MS: '300' });

  it.each(routeRows(EVERY_FAST_ROUTE))('answer 500 pool to %s exactly as the router does', async (_name, row) => {
    const answer = async (app: NestExpressApplication) => {
      const token = hsToken({ role: 'read-write', tenant: newTenant() });
      // The pool's only connection, taken for the duration of the request.
      const runner = new HeldConnection(app.get(Database));
      await runner.connect();
      try {
        return await onTheWire(app, row.head(token), row.body);
      } finally {
        await runner.release();
      }
    };

    await expectRoutersAnswer(apps, 500, answer);
    expect(JSON.parse((await answer(apps.fast)).body)).toEqual({ error: 'pool' });
  });
});

describe('fast routes refusing with 503', () => {
  const apps = bothPaths();

  it('answer a push while pushes are paused exactly as the router does', async () => {
    const answer = async (app: NestExpressApplication) => {
      const tenant = newTenant();
      await app.get(MaintenanceService).set(tenant, { pushes: true });
      return onTheWire(app, pushAs(hsToken({ role: 'read-write', tenant }), undefined, ...json(twoItems)), twoItems);
    };

    await expectRoutersAnswer(apps, 503, answer);
  });

  it('answer a parked poll when the broker begins to drain exactly as the router does, and refuse what comes next', async () => {
    const answer = async (app: NestExpressApplication) => {
      const token = hsToken({ role: 'read-write', tenant: newTenant() });
      const parked = onTheWire(app, popAs('/api/v1/pop/queue/drained?wait=true&timeout=60000')(token));
      await waitFor(() => app.get(ParkedPolls).total > 0, 'the poll parked');
      const server = app.getHttpServer();
      const { port } = server.address() as AddressInfo;
      // Taken before the listener closes, as a request already on its way would be.
      const next = connect(port, '127.0.0.1');
      await new Promise((resolve) => next.once('connect', resolve));
      app.get(DrainService).begin();
      const later = await new Promise<string>((resolve) => {
        const chunks: Buffer[] = [];
        next.on('data', (chunk) => chunks.push(chunk));
        next.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        next.write(`${extendOwn({ tenant: '', token, leaseId: UNKNOWN_LEASE })}\r\nHost: leasehold\r\n\r\n`);
      });
      return { parked: await parked, later: later.split('\r\n')[0] };
    };

    const fast = await answer(apps.fast);
    const routed = await answer(apps.routed);

    expect(fast.parked.status).toBe(503);
    expect(comparableMasked(fast.parked)).toEqual(comparableMasked(routed.parked));
    expect(fast.later).toBe('HTTP/1.1 503 Service Unavailable');
    expect(fast.later).toBe(routed.later);
  });
});

/** Marks every response it sees, so a test can tell the router served it. */
class MarkingInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next
      .handle()
      .pipe(tap(() => context.switchToHttp().getResponse<Response>().setHeader('x-intercepted', 'yes')));
  }
}

describe('fast routes in an application with a global interceptor', () => {
  const withInterceptor = (app: NestExpressApplication) => app.useGlobalInterceptors(new MarkingInterceptor());

  it('refuses to start, naming each fast handler and why', async () => {
    const started = createTestApp({}, {}, withInterceptor);

    await expect(started).rejects.toThrow(
      '@FastRoute() LeaseController.extend cannot be served ahead of the router: global interceptors are registered',
    );
    await expect(started).rejects.toThrow('@FastRoute() PushController.push cannot be served');
  });

  it('starts with the fast path turned off, and the router serves the route with the interceptor', async () => {
    const app = await createTestApp({}, { fastPath: false }, withInterceptor);
    try {
      const tenant = newTenant();
      const lease = await createLease(app, tenant, [30]);
      const timedBefore = await requestsTimed(app);

      const response = await onTheWire(
        app,
        post(`/api/v1/lease/${lease.leaseId}/extend`, `${TENANT_HEADER}: ${tenant}`),
      );

      expect(response.status).toBe(200);
      expect(response.headers['x-intercepted']).toBe('yes');
      expect((await requestsTimed(app)) - timedBefore).toBe(1);
      expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(JSON.parse(response.body)).toMatchObject({ success: true, renewed: 1 });
      expect(await servedFast(app)).toBe(0);
    } finally {
      await app.close();
    }
  });
});
