import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import request from 'supertest';
import { INSUFFICIENT_PERMISSIONS } from '../src/auth/access.guard';
import { AUTHENTICATION_REQUIRED } from '../src/auth/token-problem';
import { PAYLOAD_TOO_LARGE } from '../src/http/request-body';
import { TOO_MANY_REQUESTS } from '../src/limits/route-class.decorator';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';

interface RequestMedia {
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}

/** What a caller would type into Swagger UI's empty path parameters. */
const PATH_VALUES: Record<string, string> = {
  queue: 'orders',
  partition: 'Default',
  leaseId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91',
  partitionId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92',
  transactionId: 'order-42-created',
  group: 'billing',
  name: 'orders.per_customer_per_min',
};

interface Operation {
  parameters?: Array<{
    name: string;
    in: string;
    example?: unknown;
    examples?: unknown;
    schema?: { example?: unknown };
  }>;
  requestBody?: unknown;
  responses: Record<string, { content?: Record<string, ErrorMedia> }>;
}

interface ErrorMedia {
  example?: { error: string };
  examples?: Record<string, { value: { error: string } }>;
  schema?: { example?: { error: string } };
}

/** Every operation of the document, as [method path, operation]. */
function operationsOf(document: { paths: Record<string, Record<string, Operation>> }): Array<[string, Operation]> {
  return Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]): [string, Operation] => [
      `${method.toUpperCase()} ${path}`,
      operation,
    ]),
  );
}

/** The error texts a documented status shows in Swagger UI, the default one first. */
function errorExamples(operation: Operation, status: string): string[] {
  const media = operation.responses[status]?.content?.['application/json'];
  if (!media) return [];
  if (media.example) return [media.example.error];
  if (media.schema?.example) return [media.schema.example.error];
  return Object.values(media.examples ?? {}).map((example) => example.value.error);
}

describe('OpenAPI documentation', () => {
  let app: NestExpressApplication;
  let built: jest.SpyInstance;

  beforeAll(async () => {
    built = jest.spyOn(SwaggerModule, 'createDocument');
    app = await createTestApp();
  });

  afterAll(async () => {
    built.mockRestore();
    await app.close();
  });

  it('builds the document when first asked for, not at boot, and once', async () => {
    expect(built).not.toHaveBeenCalled();
    const server = app.getHttpServer();
    await request(server).get('/docs-json').expect(200);
    await request(server).get('/docs-yaml').expect(200);
    await request(server).get('/docs/swagger-ui-init.js').expect(200);
    expect(built).toHaveBeenCalledTimes(1);
  });

  it('serves Swagger UI at /docs', async () => {
    const response = await request(app.getHttpServer()).get('/docs/');

    expect(response.status).toBe(200);
    expect(response.text).toContain('swagger-ui');
  });

  it('keeps a pasted bearer token in the page only, never in local storage (persistAuthorization off)', async () => {
    const response = await request(app.getHttpServer()).get('/docs/swagger-ui-init.js');

    expect(response.status).toBe(200);
    expect(response.text).toMatch(/"persistAuthorization":\s*false/);
  });

  it("answers the page, its files and the documents with the console's security headers: no framing, no sniffing", async () => {
    for (const path of [
      '/docs',
      '/docs/',
      '/docs/swagger-ui-init.js',
      '/docs/swagger-ui.css',
      '/docs-json',
      '/docs-yaml',
    ]) {
      const response = await request(app.getHttpServer()).get(path);
      expect([path, response.status]).toEqual([path, 200]);
      expect([path, response.headers['content-security-policy']]).toEqual([
        path,
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
          "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      ]);
      expect(response.headers['x-frame-options']).toBe('DENY');
      expect(response.headers['x-content-type-options']).toBe('nosniff');
      expect(response.headers['referrer-policy']).toBe('no-referrer');
      expect(response.headers['cross-origin-opener-policy']).toBe('same-origin');
    }
  });

  it('describes the lease route with its body, six response keys, every status and bearer auth', async () => {
    const response = await request(app.getHttpServer()).get('/docs-json');
    expect(response.status).toBe(200);
    const document = response.body;
    const operation = document.paths['/api/v1/lease/{leaseId}/extend'].post;

    expect(Object.keys(operation.responses).sort()).toEqual(['200', '401', '403', '413', '429', '500']);
    expect(operation.security).toEqual([{ bearer: [] }]);
    expect(document.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    const bodyRef = operation.requestBody.content['application/json'].schema.$ref as string;
    const body = document.components.schemas[bodyRef.split('/').pop()!];
    expect(body.properties.seconds).toMatchObject({ type: 'integer', default: 60 });
    const responseRef = operation.responses['200'].content['application/json'].schema.$ref as string;
    const schema = document.components.schemas[responseRef.split('/').pop()!];
    expect(Object.keys(schema.properties)).toEqual([
      'leaseId',
      'success',
      'renewed',
      'newExpiresAt',
      'expiresAt',
      'lease_expires_at',
    ]);
    expect(schema.properties.lease_expires_at.description).toMatch(/one identical value/);
    expect(schema.properties.newExpiresAt.example).toBe('2026-07-30T11:06:44.512873Z');
  });

  it('documents the database failures of the message plane, and the 503 of a draining broker on the pops', async () => {
    const { paths } = (await request(app.getHttpServer()).get('/docs-json')).body;
    const push = paths['/api/v1/push'].post;
    const pop = paths['/api/v1/pop/queue/{queue}'].get;
    const ack = paths['/api/v1/ack/batch'].post;

    for (const operation of [push, pop, ack]) {
      expect(operation.responses['500'].description).toMatch(/`pool`.*`database timeout`/);
    }
    expect(push.responses['500'].description).toMatch(/retry it with the same transactionIds/);
    expect(pop.responses['503'].description).toMatch(/shutting down.*Retry-After/);
  });

  it('bounds each route of the message plane in docs/failures.md, with the 500s its OpenAPI documents', async () => {
    const { paths } = (await request(app.getHttpServer()).get('/docs-json')).body;
    const failures = readFileSync(join(__dirname, '..', 'docs', 'failures.md'), 'utf8').split('\n');
    const routes: Array<[string, string, string]> = [
      ['post', '/api/v1/push', 'POST /api/v1/push'],
      ['get', '/api/v1/pop/queue/{queue}', 'GET /api/v1/pop/...'],
      ['post', '/api/v1/ack/batch', 'POST /api/v1/ack'],
      ['post', '/api/v1/transaction', 'POST /api/v1/transaction'],
    ];

    for (const [method, path, row] of routes) {
      expect(paths[path][method].responses['500'].description).toMatch(/`pool`.*`database timeout`/);
      const bound = failures.find((line) => line.startsWith(`| \`${row}\``));
      expect([path, bound]).toEqual([path, expect.stringMatching(/\| `500 pool` or `500 database timeout` \|$/)]);
    }
    const api = readFileSync(join(__dirname, '..', 'docs', 'api.md'), 'utf8');
    const transactions = api.slice(api.indexOf('## Atomic transactions'), api.indexOf('## Queue options'));
    expect(transactions).toContain('`500 {"error":"pool"}`');
    expect(transactions).toContain('`500 {"error":"database timeout"}`');
    expect(transactions).not.toMatch(/database[^.\n]*503/);
  });

  it('leaves /health public and undocumented for auth', async () => {
    const response = await request(app.getHttpServer()).get('/docs-json');

    expect(response.body.paths['/health'].get.security).toBeUndefined();
  });
});

describe('OpenAPI documentation of the message routes', () => {
  let app: NestExpressApplication;

  beforeAll(async () => {
    app = await createTestApp();
  });

  afterAll(async () => {
    await app.close();
  });

  it.each([
    ['post', '/api/v1/push', ['201', '400', '401', '403', '413', '429', '500', '503']],
    ['get', '/api/v1/system/maintenance', ['200', '401', '403', '429', '500']],
    ['get', '/api/v1/messages', ['200', '400', '401', '403', '404', '429', '500']],
    ['get', '/api/v1/pop', ['200', '204', '400', '401', '403', '429', '500', '503']],
    ['get', '/api/v1/resources/namespaces', ['200', '401', '403', '429', '500']],
    ['get', '/api/v1/messages/{partitionId}/{transactionId}', ['200', '400', '401', '403', '404', '429', '500']],
    [
      'delete',
      '/api/v1/messages/{partitionId}/{transactionId}',
      ['200', '400', '401', '403', '404', '409', '429', '500'],
    ],
    [
      'post',
      '/api/v1/messages/{partitionId}/{transactionId}/retry',
      ['200', '400', '401', '403', '404', '409', '429', '500'],
    ],
    ['delete', '/api/v1/queues/{queue}/clear', ['200', '400', '401', '403', '404', '429', '500']],
    [
      'post',
      '/api/v1/messages/{partitionId}/{transactionId}/dlq',
      ['200', '400', '401', '403', '404', '409', '429', '500'],
    ],
    ['post', '/api/v1/system/maintenance', ['200', '400', '401', '403', '413', '429', '500']],
    ['post', '/api/v1/system/maintenance/pop', ['200', '400', '401', '403', '413', '429', '500']],
    ['get', '/api/v1/pop/queue/{queue}', ['200', '204', '400', '401', '403', '429', '500', '503']],
    [
      'get',
      '/api/v1/pop/queue/{queue}/partition/{partition}',
      ['200', '204', '400', '401', '403', '429', '500', '503'],
    ],
    ['post', '/api/v1/ack', ['200', '400', '401', '403', '413', '429', '500']],
    ['post', '/api/v1/ack/batch', ['200', '400', '401', '403', '413', '429', '500']],
    ['post', '/api/v1/configure', ['200', '400', '401', '403', '413', '429', '500']],
    ['get', '/api/v1/resources/queues', ['200', '400', '401', '403', '429', '500']],
    ['get', '/api/v1/resources/queues/{queue}', ['200', '400', '401', '403', '404', '429', '500']],
    ['delete', '/api/v1/resources/queues/{queue}', ['200', '400', '401', '403', '429', '500']],
    ['get', '/api/v1/dlq', ['200', '400', '401', '403', '404', '429', '500']],
    ['get', '/api/v1/consumer-groups', ['200', '400', '401', '403', '404', '429', '500']],
    ['get', '/api/v1/consumer-groups/lagging', ['200', '400', '401', '403', '429', '500']],
    ['get', '/api/v1/consumer-groups/{group}', ['200', '400', '401', '403', '429', '500']],
    ['delete', '/api/v1/consumer-groups/{group}', ['200', '400', '401', '403', '429', '500']],
    ['delete', '/api/v1/consumer-groups/{group}/queues/{queue}', ['200', '400', '401', '403', '429', '500']],
    [
      'post',
      '/api/v1/consumer-groups/{group}/queues/{queue}/seek',
      ['200', '400', '401', '403', '404', '413', '429', '500'],
    ],
    [
      'post',
      '/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek',
      ['200', '400', '401', '403', '404', '413', '429', '500'],
    ],
    ['post', '/api/v1/traces', ['201', '400', '401', '403', '404', '409', '413', '429', '500']],
    ['get', '/api/v1/traces/{partitionId}/{transactionId}', ['200', '400', '401', '403', '429', '500']],
    ['get', '/api/v1/traces/by-name/{name}', ['200', '400', '401', '403', '429', '500']],
    ['get', '/api/v1/traces/names', ['200', '400', '401', '403', '429', '500']],
  ])('documents %s %s with its statuses and bearer auth', async (method, path, statuses) => {
    const response = await request(app.getHttpServer()).get('/docs-json');
    const operation = response.body.paths[path][method];

    expect(Object.keys(operation.responses).sort()).toEqual(statuses);
    expect(operation.security).toEqual([{ bearer: [] }]);
  });

  it('lists the pop query parameters in reading order', async () => {
    const response = await request(app.getHttpServer()).get('/docs-json');
    const parameters = response.body.paths['/api/v1/pop/queue/{queue}'].get.parameters;

    expect(
      parameters
        .filter((parameter: { in: string }) => parameter.in === 'query')
        .map((parameter: { name: string }) => parameter.name),
    ).toEqual([
      'batch',
      'partitions',
      'wait',
      'timeout',
      'leaseSeconds',
      'consumerGroup',
      'subscriptionMode',
      'subscriptionFrom',
      'autoAck',
    ]);
  });
});

describe('OpenAPI documentation: titles, per-status examples and path parameters', () => {
  let app: NestExpressApplication;
  let document: {
    info: { title: string };
    paths: Record<string, Record<string, Operation>>;
    components: { schemas: Record<string, { properties: Record<string, { example?: unknown }> }> };
  };
  let operations: Array<[string, Operation]>;

  beforeAll(async () => {
    app = await createTestApp();
    document = (await request(app.getHttpServer()).get('/docs-json').expect(200)).body;
    operations = operationsOf(document);
  });

  afterAll(async () => {
    await app.close();
  });

  it('titles the Swagger UI page and the OpenAPI document Leasehold', async () => {
    const page = await request(app.getHttpServer()).get('/docs/');

    expect(page.text).toMatch(/<title>Leasehold<\/title>/);
    expect(document.info.title).toBe('Leasehold');
  });

  it('gives every documented error status its own example, and none to the shared error schema', () => {
    const errorStatuses = operations.flatMap(([name, operation]) =>
      Object.keys(operation.responses)
        .filter((status) => Number(status) >= 400 && operation.responses[status].content?.['application/json'])
        .map((status) => [name, status, errorExamples(operation, status)] as const),
    );

    expect(errorStatuses.length).toBeGreaterThan(50);
    expect(errorStatuses.filter(([, , examples]) => examples.length === 0)).toEqual([]);
    expect(document.components.schemas.ErrorResponseDto.properties.error.example).toBeUndefined();
  });

  it("shows the auth guard's reasons on 401 and Insufficient permissions on 403, never the one for the other", () => {
    const protectedOperations = operations.filter(([, operation]) => operation.responses['401']);
    expect(protectedOperations.length).toBeGreaterThanOrEqual(11);

    for (const [name, operation] of protectedOperations) {
      const unauthorized = errorExamples(operation, '401');
      const forbidden = errorExamples(operation, '403');
      expect([name, unauthorized[0]]).toEqual([name, AUTHENTICATION_REQUIRED]);
      for (const text of unauthorized)
        expect([name, text]).toEqual([name, expect.stringMatching(/^(Authentication required|Token |Invalid token)/)]);
      expect([name, forbidden[0]]).toEqual([name, INSUFFICIENT_PERMISSIONS]);
      expect(unauthorized.filter((text) => forbidden.includes(text))).toEqual([]);
    }
  });

  it("shows the contract's 500 bodies (pool first), 429 too many requests and 503 shutting down", () => {
    for (const [name, operation] of operations.filter(([, candidate]) => candidate.responses['500'])) {
      expect([name, errorExamples(operation, '500')[0]]).toEqual([name, 'pool']);
      expect(errorExamples(operation, '500')).not.toContain(INSUFFICIENT_PERMISSIONS);
    }
    const extend = document.paths['/api/v1/lease/{leaseId}/extend'].post;
    expect(errorExamples(extend, '500')).toEqual(expect.arrayContaining(['pool', 'renew failed: statement timeout']));
    expect(errorExamples(document.paths['/api/v1/push'].post, '500')).toEqual(
      expect.arrayContaining(['pool', 'database timeout']),
    );
    for (const [name, operation] of operations.filter(([, candidate]) => candidate.responses['429'])) {
      expect([name, errorExamples(operation, '429')[0]]).toEqual([name, TOO_MANY_REQUESTS]);
    }
    expect(errorExamples(document.paths['/api/v1/pop/queue/{queue}'].get, '429')).toContain('too many waiting pops');
    expect(errorExamples(document.paths['/api/v1/pop/queue/{queue}'].get, '503')).toEqual(['shutting down']);
  });

  it('documents 413 payload too large on every route that takes a body', () => {
    const withBody = operations.filter(([, operation]) => operation.requestBody !== undefined);

    expect(withBody.map(([name]) => name).sort()).toEqual([
      'POST /api/v1/ack',
      'POST /api/v1/ack/batch',
      'POST /api/v1/configure',
      'POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek',
      'POST /api/v1/consumer-groups/{group}/queues/{queue}/seek',
      'POST /api/v1/lease/{leaseId}/extend',
      'POST /api/v1/push',
      'POST /api/v1/system/maintenance',
      'POST /api/v1/system/maintenance/pop',
      'POST /api/v1/traces',
      'POST /api/v1/transaction',
      'POST /streams/v1/cycle',
      'POST /streams/v1/queries',
      'POST /streams/v1/state/get',
    ]);
    for (const [name, operation] of withBody) {
      expect([name, errorExamples(operation, '413')[0]]).toEqual([name, PAYLOAD_TOO_LARGE]);
    }
    expect(errorExamples(document.paths['/api/v1/push'].post, '413')).toContain(
      'items[1].payload is larger than 4194304 bytes (4194306)',
    );
  });

  it("states each body route's own bound in its 413", () => {
    const description = (path: string) =>
      (document.paths[path].post.responses['413'] as { description?: string }).description;

    expect(description('/api/v1/lease/{leaseId}/extend')).toMatch(/^The body is above 1 KiB/);
    expect(description('/api/v1/ack')).toMatch(/^The body is above 128 KiB/);
    expect(description('/api/v1/configure')).toMatch(/^The body is above 256 KiB/);
    expect(description('/api/v1/consumer-groups/{group}/queues/{queue}/seek')).toMatch(/^The body is above 1 KiB/);
    expect(description('/api/v1/push')).toMatch(/^The body is above BODY_LIMIT/);
    expect(description('/api/v1/ack/batch')).toMatch(/^The body is above BODY_LIMIT/);
    expect(description('/api/v1/traces')).toMatch(/^The body is above 128 KiB/);
  });

  it('shows the 200 body of both pops and both acks, with its schema', () => {
    type Media = { schema?: unknown; example?: Array<Record<string, unknown>> };
    const ok = (path: string, method: string): Media =>
      (document.paths[path][method].responses['200'].content as Record<string, Media> | undefined)?.[
        'application/json'
      ] ?? {};
    for (const path of ['/api/v1/pop/queue/{queue}', '/api/v1/pop/queue/{queue}/partition/{partition}']) {
      expect(ok(path, 'get').schema).toEqual({ $ref: '#/components/schemas/PopResponseDto' });
    }
    for (const path of ['/api/v1/ack', '/api/v1/ack/batch']) {
      expect(ok(path, 'post').schema).toEqual({ type: 'array', items: { $ref: '#/components/schemas/AckResultDto' } });
      expect(ok(path, 'post').example?.[0]).toMatchObject({ success: true, leaseReleased: false });
    }
    expect(Object.keys(document.components.schemas.PopResponseDto.properties)).toContain('messages');
  });

  it('lists the message routes first in Swagger UI, push then pop, and every tag it uses', () => {
    const tags = (document as unknown as { tags: Array<{ name: string }> }).tags.map((tag) => tag.name);
    const used = new Set(
      operations.flatMap(([, operation]) => (operation as unknown as { tags?: string[] }).tags ?? []),
    );
    const messages = operations.filter(([, operation]) =>
      ((operation as unknown as { tags?: string[] }).tags ?? []).includes('messages'),
    );

    expect(tags[0]).toBe('messages');
    expect([...used].filter((tag) => !tags.includes(tag))).toEqual([]);
    expect(messages.slice(0, 2).map(([name]) => name)).toEqual(['POST /api/v1/push', 'GET /api/v1/pop/queue/{queue}']);
  });

  it('gives every request body a working example: sent as it is, through Swagger UI, it is not refused', async () => {
    const tenant = newTenant();
    const withBody = operations.filter(([, operation]) => operation.requestBody !== undefined);
    const tried: Array<[string, number]> = [];
    const missing: string[] = [];
    for (const [name, operation] of withBody) {
      const media = (operation.requestBody as { content: Record<string, RequestMedia> }).content['application/json'];
      const examples =
        media.examples !== undefined
          ? Object.values(media.examples).map((example) => example.value)
          : media.example !== undefined
            ? [media.example]
            : [];
      if (examples.length === 0) missing.push(name);
      const [method, path] = name.split(' ');
      const url = path.replace(/\{(\w+)\}/g, (_, parameter: string) => PATH_VALUES[parameter] ?? 'probe');
      for (const example of examples) {
        const response = await request(app.getHttpServer())
          [method.toLowerCase() as 'post'](url)
          .set(TENANT_HEADER, tenant)
          .send(example as object);
        tried.push([name, response.status]);
      }
    }
    expect(missing).toEqual([]);
    expect(tried.filter(([, status]) => status === 400 || status === 413 || status === 422)).toEqual([]);
  });

  it('pre-fills no path parameter in Swagger UI, and describes the lease id instead', () => {
    const pathParameters = operations.flatMap(([name, operation]) =>
      (operation.parameters ?? [])
        .filter((parameter) => parameter.in === 'path')
        .map((parameter) => [name, parameter] as const),
    );

    expect(pathParameters.length).toBeGreaterThanOrEqual(5);
    for (const [name, parameter] of pathParameters) {
      expect([name, parameter.name, parameter.example, parameter.examples, parameter.schema?.example]).toEqual([
        name,
        parameter.name,
        undefined,
        undefined,
        undefined,
      ]);
    }
    const leaseId = document.paths['/api/v1/lease/{leaseId}/extend'].post.parameters!.find(
      (parameter) => parameter.name === 'leaseId',
    );
    expect(leaseId).toMatchObject({
      in: 'path',
      required: true,
      description: expect.stringMatching(/UUID.*8-4-4-4-12/),
    });
  });
});
