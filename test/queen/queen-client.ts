import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { TENANT_HEADER } from '../support/test-app';

/**
 * The requests Queen's JavaScript client (queen-mq) sends for the calls its
 * own test suite makes, replayed over HTTP: the package is not on the npm
 * registry this project installs from, and it needs Node 22. The shapes
 * follow the client's source: `config()` merges its QUEUE_DEFAULTS into the
 * options, `push` sends a generated transactionId and partition Default,
 * `pop` sends batch, wait and timeout.
 */
export const QUEEN_QUEUE_DEFAULTS = {
  leaseTime: 300,
  retryLimit: 3,
  priority: 0,
  delayedProcessing: 0,
  windowBuffer: 0,
  maxSize: 10000,
  retentionSeconds: 0,
  completedRetentionSeconds: 0,
  encryptionEnabled: false,
};

export class QueenClient {
  constructor(
    private readonly app: NestExpressApplication,
    private readonly tenant: string,
  ) {}

  private get http() {
    return request(this.app.getHttpServer());
  }

  /** `queue(name).config(options).create()` */
  async create(queue: string, options: Record<string, unknown>): Promise<{ configured?: boolean }> {
    const response = await this.http
      .post('/api/v1/configure')
      .set(TENANT_HEADER, this.tenant)
      .send({ queue, namespace: null, task: null, options: { ...QUEEN_QUEUE_DEFAULTS, ...options } });
    return response.body as { configured?: boolean };
  }

  /** `queue(name).push([{ data }])` */
  async push(queue: string, payload: unknown): Promise<number> {
    const response = await this.http
      .post('/api/v1/push')
      .set(TENANT_HEADER, this.tenant)
      .send({ items: [{ queue, partition: 'Default', payload, transactionId: crypto.randomUUID() }] });
    return response.status;
  }

  /** `queue(name).batch(n).wait(false).pop()`: the messages, [] for a 204 */
  async pop(queue: string, batch: number): Promise<unknown[]> {
    const response = await this.http
      .get(`/api/v1/pop/queue/${queue}`)
      .set(TENANT_HEADER, this.tenant)
      .query({ batch, wait: false, timeout: 30000 });
    return response.status === 200 ? (response.body as { messages: unknown[] }).messages : [];
  }
}
