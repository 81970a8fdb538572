import { randomUUID } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { ROOT_LOGGER, RootLogger } from '../../src/logging/root-logger';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from '../support/test-app';
import { TcpProxy } from '../support/tcp-proxy';
import { within } from '../support/wait';
import { CapturedLogs } from './support/captured-logs';

const ACQUIRE_TIMEOUT_MS = 500;
const STATEMENT_TIMEOUT_MS = 1_000;

interface Answer {
  status: number;
  error: unknown;
}

/** A route, as a caller of one tenant sends it. */
type Call = (base: string, tenant: string) => Promise<Answer>;

function calling(method: string, path: () => string, body?: () => unknown): Call {
  return async (base, tenant) => {
    const response = await fetch(`${base}${path()}`, {
      method,
      headers: { [TENANT_HEADER]: tenant, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body()),
    });
    const text = await response.text();
    return { status: response.status, error: text ? (JSON.parse(text) as { error?: unknown }).error : undefined };
  };
}

/** Each route, and what its calls answer: the first held past its budget, the second finding no connection in time. */
const ROUTES: Array<[string, Call, string[]]> = [
  [
    'push',
    calling(
      'POST',
      () => '/api/v1/push',
      () => ({ items: [{ queue: 'logged', payload: {} }] }),
    ),
    ['database timeout', 'pool'],
  ],
  ['pop', calling('GET', () => '/api/v1/pop/queue/logged'), ['database timeout', 'pool']],
  [
    'ack',
    calling(
      'POST',
      () => '/api/v1/ack',
      () => ({ transactionId: 'gone', partitionId: randomUUID(), leaseId: randomUUID() }),
    ),
    ['database timeout', 'pool'],
  ],
  [
    'configure',
    calling(
      'POST',
      () => '/api/v1/configure',
      () => ({ queue: 'logged' }),
    ),
    ['database timeout', 'pool'],
  ],
  [
    'transaction',
    calling(
      'POST',
      () => '/api/v1/transaction',
      () => ({ operations: [{ type: 'push', items: [{ queue: 'logged', payload: {} }] }] }),
    ),
    ['database timeout', 'pool'],
  ],
  [
    'extend',
    calling(
      'POST',
      () => `/api/v1/lease/${randomUUID()}/extend`,
      () => ({ seconds: 30 }),
    ),
    // Renewals take no tenant's share of the pool: a second one's answer depends on the pool's state, not tried.
    ['renew failed: database timeout'],
  ],
];

/**
 * A 500 the database caused (`pool`, `database timeout`, `renew failed: ...`) is logged as warnings with its cause,
 * the request's own line included, never as an error: errors are kept for the broker's own bugs. Each route's first
 * statement is held by the proxy past its budget (a timeout), while a second call of the same tenant finds no
 * connection in time (`pool`).
 */
(onEmbeddedDatabase ? describe.skip : describe)('database failures in the log', () => {
  let proxy: TcpProxy;
  let app: NestExpressApplication;
  let logs: CapturedLogs;
  let restore: () => void;
  let base: string;

  beforeAll(async () => {
    proxy = TcpProxy.forDatabaseUrl(process.env.DATABASE_URL!);
    await proxy.start();
    logs = new CapturedLogs();
    app = await createTestApp(
      {
        DATABASE_URL: proxy.rewrite(process.env.DATABASE_URL!),
        DB_POOL_SIZE: '4',
        // The second call of a tenant waits for the first's connection: `pool` once its acquire time is up.
        DB_TENANT_MAX_CONNECTIONS: '1',
        DB_ACQUIRE_TIMEOUT_MS: String(ACQUIRE_TIMEOUT_MS),
        DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
        LOG_REQUESTS: 'true',
      },
      {},
      (created) => created.useLogger(logs),
    );
    restore = logs.captureRequests(app.get<RootLogger>(ROOT_LOGGER));
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    restore();
    await app.close();
    await proxy.stop();
  });

  it.each(ROUTES)(
    '%s: each database failure it answers is a warning with the cause, never an error',
    async (_route, call, expected) => {
      const tenant = newTenant();
      logs.entries.length = 0;
      // Its statements carry the tenant's id: the first to reach the proxy stalls it.
      const stalled = proxy.stallWhen(tenant);
      let answers: Answer[];
      try {
        const held = call(base, tenant);
        await within(stalled, 'the first statement is held');
        const refused = expected.slice(1).map(() => call(base, tenant));
        answers = await Promise.all([held, ...refused]);
      } finally {
        proxy.heal();
      }
      expect(answers).toEqual(expected.map((error) => ({ status: 500, error })));
      expect(logs.at('error')).toEqual([]);
      expect(logs.entries.filter((entry) => entry.context === 'request')).toEqual(
        expected.map(() => expect.objectContaining({ level: 'warn', status: 500 })),
      );
      // And a warning with its cause, in parentheses, for each.
      const causes = logs.at('warn').filter((entry) => entry.context !== 'request');
      for (const error of expected) {
        const line = error.startsWith('renew failed')
          ? new RegExp(`^${error} \\(.+\\)$`)
          : new RegExp(`: database ${error === 'pool' ? 'unavailable' : 'timeout'}: ${error} \\(.+\\)$`);
        expect(causes.filter((entry) => line.test(entry.message)).length).toBeGreaterThanOrEqual(1);
      }
    },
  );
});
