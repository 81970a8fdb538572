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

  it('leaves /health public and undocumented for auth', async () => {
    const response = await request(app.getHttpServer()).get('/docs-json');

    expect(response.body.paths['/health'].get.security).toBeUndefined();
  });
});
