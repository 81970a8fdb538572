import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { createTestApp } from './support/test-app';

describe('OpenAPI documentation', () => {
  let app: NestExpressApplication;

  beforeAll(async () => {
    app = await createTestApp();
  });

  afterAll(async () => {
    await app.close();
  });

  it('serves Swagger UI at /docs', async () => {
    const response = await request(app.getHttpServer()).get('/docs/');

    expect(response.status).toBe(200);
    expect(response.text).toContain('swagger-ui');
  });

  it('keeps a pasted bearer token across page reloads (persistAuthorization)', async () => {
    const response = await request(app.getHttpServer()).get('/docs/swagger-ui-init.js');

    expect(response.status).toBe(200);
    expect(response.text).toMatch(/"persistAuthorization":\s*true/);
  });

  it('describes the lease route with its body, six response keys, every status and bearer auth', async () => {
    const response = await request(app.getHttpServer()).get('/docs-json');
    expect(response.status).toBe(200);
    const document = response.body;
    const operation = document.paths['/api/v1/lease/{leaseId}/extend'].post;

    expect(Object.keys(operation.responses).sort()).toEqual(['200', '401', '403', '500']);
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
    ['post', '/api/v1/push', ['201', '400', '401', '403', '413', '500']],
    ['get', '/api/v1/pop/queue/{queue}', ['200', '204', '400', '401', '403', '500', '503']],
    ['get', '/api/v1/pop/queue/{queue}/partition/{partition}', ['200', '204', '400', '401', '403', '500', '503']],
    ['post', '/api/v1/ack', ['200', '400', '401', '403', '500']],
    ['post', '/api/v1/ack/batch', ['200', '400', '401', '403', '500']],
    ['post', '/api/v1/configure', ['200', '400', '401', '403', '500']],
    ['get', '/api/v1/resources/queues', ['200', '400', '401', '403', '500']],
    ['get', '/api/v1/resources/queues/{queue}', ['200', '400', '401', '403', '404', '500']],
    ['delete', '/api/v1/resources/queues/{queue}', ['200', '400', '401', '403', '500']],
    ['get', '/api/v1/dlq', ['200', '400', '401', '403', '404', '500']],
  ])('documents %s %s with its statuses and bearer auth', async (method, path, statuses) => {
    const response = await request(app.getHttpServer()).get('/docs-json');
    const operation = response.body.paths[path][method];

    expect(Object.keys(operation.responses).sort()).toEqual(statuses);
    expect(operation.security).toEqual([{ bearer: [] }]);
  });

  it('lists the pop query parameters in reading order', async () => {
    const response = await request(app.getHttpServer()).get('/docs-json');
    const parameters = response.body.paths['/api/v1/pop/queue/{queue}'].get.parameters;

    expect(parameters.filter((parameter: { in: string }) => parameter.in === 'query').map((parameter: { name: string }) => parameter.name)).toEqual([
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
