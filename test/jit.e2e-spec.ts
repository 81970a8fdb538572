import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import request from 'supertest';
import { Database } from '../src/database/database';
import { SESSION_SETTINGS } from '../src/database/session-settings';
import { BrokerClient } from './support/broker-client';
import { ScratchDatabase } from './support/scratch-database';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { useTestBroker } from './support/test-broker';

interface Session {
  client: Client;
  application: string;
  statements: string[];
  notices: string[];
}

const originalConnect = Client.prototype.connect as (...args: unknown[]) => unknown;
const originalQuery = Client.prototype.query as (...args: unknown[]) => unknown;

/** Every pg connection this process opens from here on (the pool's are pg Clients too), with what it sent and heard. */
function watchSessions(): { sessions: Session[]; restore: () => void } {
  const sessions: Session[] = [];
  const byClient = new Map<Client, Session>();
  const connect = jest.spyOn(Client.prototype, 'connect');
  const query = jest.spyOn(Client.prototype, 'query');
  const sessionOf = (client: Client): Session => {
    let session = byClient.get(client);
    if (!session) {
      const parameters = (client as unknown as { connectionParameters: { application_name?: string } })
        .connectionParameters;
      session = { client, application: parameters.application_name ?? '', statements: [], notices: [] };
      byClient.set(client, session);
      sessions.push(session);
      client.on('notice', (notice) => session!.notices.push(notice.message ?? ''));
    }
    return session;
  };
  connect.mockImplementation(function (this: Client, ...args: unknown[]) {
    sessionOf(this);
    return originalConnect.apply(this, args);
  });
  query.mockImplementation(function (this: Client, ...args: unknown[]) {
    const [first] = args as [string | { text: string }];
    sessionOf(this).statements.push(typeof first === 'string' ? first : first.text);
    return originalQuery.apply(this, args);
  });
  return {
    sessions,
    restore: () => {
      connect.mockRestore();
      query.mockRestore();
    },
  };
}

/** auto_explain's plans, as NOTICEs with log_level notice: "duration: ... plan:" and the plan in JSON. */
function plansOf(notices: string[]): Array<{ 'Query Text': string; JIT?: unknown }> {
  return notices
    .filter((notice) => notice.includes('plan:'))
    .map((notice) => JSON.parse(notice.slice(notice.indexOf('{'))) as { 'Query Text': string; JIT?: unknown });
}

describe("the broker's pooled sessions", () => {
  const broker = useTestBroker();

  it('run with jit off, on PostgreSQL and on the embedded database alike', async () => {
    const [{ jit }] = await broker.dataSource.query('SHOW jit');
    expect(jit).toBe('off');
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('JIT compilation', () => {
  it("runs every session the broker opens with jit off: the pool's, LISTEN, the probe and the migrations'", async () => {
    const database = await ScratchDatabase.create('leasehold_sessions', { migrated: false });
    const watched = watchSessions();
    let app: NestExpressApplication | undefined;
    try {
      app = await createTestApp({ DATABASE_URL: database.url });
      await request(app.getHttpServer()).get('/health/ready').expect(200);
      const [{ jit }] = await app.get(Database).query('SHOW jit');
      expect(jit).toBe('off');

      const applications = new Set(watched.sessions.map((session) => session.application));
      for (const expected of ['leasehold', 'leasehold-listener', 'leasehold-probe', 'leasehold-migrations']) {
        expect(applications).toContain(expected);
      }
      for (const session of watched.sessions) {
        expect({ application: session.application, first: session.statements[0] }).toEqual({
          application: session.application,
          first: SESSION_SETTINGS,
        });
      }
      for (const session of watched.sessions.filter((each) =>
        ['leasehold-listener', 'leasehold-probe'].includes(each.application),
      )) {
        const shown = await session.client.query<{ jit: string }>('SHOW jit');
        expect({ application: session.application, jit: shown.rows[0].jit }).toEqual({
          application: session.application,
          jit: 'off',
        });
      }
    } finally {
      watched.restore();
      await app?.close();
      await database.drop();
    }
  });

  it("compiles none of a pop's or a queue listing's statements, with the database's JIT thresholds at 0", async () => {
    const database = await ScratchDatabase.create('leasehold_jit_thresholds');
    let app: NestExpressApplication | undefined;
    let watched: ReturnType<typeof watchSessions> | undefined;
    const plain = new Client({ connectionString: database.url });
    try {
      const admin = new Client({ connectionString: database.url });
      await admin.connect();
      try {
        // Every statement of a new session crosses the thresholds, and auto_explain sends its plan to the client.
        for (const setting of [
          'jit = on',
          'jit_above_cost = 0',
          'jit_inline_above_cost = 0',
          'jit_optimize_above_cost = 0',
          "session_preload_libraries = 'auto_explain'",
          'auto_explain.log_min_duration = 0',
          'auto_explain.log_analyze = on',
          "auto_explain.log_level = 'notice'",
          "auto_explain.log_format = 'json'",
        ]) {
          await admin.query(`ALTER DATABASE ${database.name} SET ${setting}`);
        }
      } finally {
        await admin.end();
      }
      // The premise: a session of its own in that database compiles what it runs.
      const heard: string[] = [];
      plain.on('notice', (notice) => heard.push(notice.message ?? ''));
      await plain.connect();
      await plain.query('SELECT count(*) FROM messages');
      expect(plansOf(heard).some((plan) => plan.JIT !== undefined)).toBe(true);

      watched = watchSessions();
      app = await createTestApp({ DATABASE_URL: database.url });
      const client = new BrokerClient(app, newTenant());
      await client.pushMany('small', 3);
      await client.pop('small', { batch: 10, consumerGroup: 'first' }).expect(200);
      await client.get('/api/v1/resources/queues').expect(200);

      const plans = watched.sessions
        .filter((session) => session.application === 'leasehold')
        .flatMap((session) => plansOf(session.notices));
      // The claim and the listing are among the statements explained.
      expect(plans.some((plan) => plan['Query Text'].includes('consumers'))).toBe(true);
      expect(plans.some((plan) => plan['Query Text'].includes('FROM queues'))).toBe(true);
      expect(plans.filter((plan) => plan.JIT !== undefined).map((plan) => plan['Query Text'])).toEqual([]);
    } finally {
      watched?.restore();
      await app?.close();
      await plain.end().catch(() => undefined);
      await database.drop();
    }
  });
});
