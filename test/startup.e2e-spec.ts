import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Exit, BrokerProcess } from './faults/support/broker-process';
import { onEmbeddedDatabase } from './support/test-app';
import { within } from './support/wait';

jest.setTimeout(400_000);

type Line = Record<string, unknown>;

/**
 * What an operator sees when the broker cannot start: every line JSON, one
 * error line naming the cause, a non-zero exit within the documented bound,
 * and nothing opened or announced before the cause was found.
 */
describe('a start that cannot succeed', () => {
  async function failedStart(
    env: Record<string, string | undefined>,
    options: { cwd?: string } = {},
  ): Promise<{ exit: Exit; lines: Line[]; ms: number }> {
    const started = performance.now();
    const broker = BrokerProcess.launch({ LOG_FORMAT: 'json', ...env }, options);
    try {
      const exit = await within(broker.exited, 'the broker exits', 60_000);
      const lines = broker.lines.filter((line) => line.trim() !== '').map((line) => JSON.parse(line) as Line);
      return { exit, lines, ms: exit.at - started };
    } finally {
      await broker.stop();
    }
  }

  const errors = (lines: Line[]): Line[] => lines.filter((line) => (line.level as number) >= 50);

  it('refuses a DATABASE_URL with a mistyped scheme at once, naming the scheme and never the password', async () => {
    const { exit, lines } = await failedStart({ DATABASE_URL: 'postgress://leasehold:s3cret-pass@127.0.0.1:5432/db' });
    expect(exit.code).toBe(1);
    expect(errors(lines)).toHaveLength(1);
    expect(String(errors(lines)[0].msg)).toContain('DATABASE_URL must start with postgres:// or postgresql://');
    expect(JSON.stringify(lines)).not.toContain('s3cret-pass');
    expect(lines.some((line) => String(line.msg).includes('Starting Nest application'))).toBe(false);
  });

  it('stops at once on a misspelt DATABSE_URL in .env, suggesting DATABASE_URL, instead of running on the embedded database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-dotenv-'));
    try {
      const dataDir = join(dir, 'pglite');
      writeFileSync(join(dir, '.env'), 'DATABSE_URL=postgres://leasehold:s3cret-pass@127.0.0.1:5432/db\n');
      const { exit, lines } = await failedStart({ DATABASE_URL: undefined, DATA_DIR: dataDir }, { cwd: dir });
      expect(exit.code).toBe(1);
      expect(errors(lines)).toHaveLength(1);
      expect(String(errors(lines)[0].msg)).toContain('.env: DATABSE_URL is not a setting; did you mean DATABASE_URL?');
      expect(JSON.stringify(lines)).not.toContain('s3cret-pass');
      expect(lines.some((line) => /started|Listening|embedded/i.test(String(line.msg)))).toBe(false);
      expect(existsSync(dataDir)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives up on a database nobody listens for within DB_CONNECT_TIMEOUT_MS, with one line naming the cause', async () => {
    const port = await closedPort();
    const { exit, lines, ms } = await failedStart({
      DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/leasehold`,
      DB_CONNECT_TIMEOUT_MS: '1500',
    });
    expect(exit.code).toBe(1);
    expect(errors(lines)).toHaveLength(1);
    expect(String(errors(lines)[0].msg)).toMatch(new RegExp(`127\\.0\\.0\\.1:${port}/leasehold: .*ECONNREFUSED`));
    expect(JSON.stringify(lines)).not.toMatch(/\bat [\w.]+ \(/);
    // The bound, plus the time a loaded machine takes to start a Node process from TypeScript sources.
    expect(ms).toBeLessThan(1_500 + 30_000);
    expect(lines.some((line) => String(line.msg).includes('Starting Nest application'))).toBe(false);
  });

  // The embedded server serves any database name.
  (onEmbeddedDatabase ? it.skip : it)('answers a missing database at once, without waiting out the bound', async () => {
    const url = new URL(process.env.DATABASE_URL!);
    url.pathname = '/leasehold_no_such_database';
    const { exit, lines } = await failedStart({ DATABASE_URL: url.toString(), DB_CONNECT_TIMEOUT_MS: '600000' });
    expect(exit.code).toBe(1);
    expect(errors(lines)).toHaveLength(1);
    expect(String(errors(lines)[0].msg)).toContain('"leasehold_no_such_database" does not exist');
  });

  describe('on a port that is already taken', () => {
    let holder: Server;
    let port: number;

    beforeAll(async () => {
      holder = createServer();
      await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
      port = (holder.address() as { port: number }).port;
    });

    afterAll(async () => {
      await new Promise((resolve) => holder.close(resolve));
    });

    it('exits 1 with one line before it says anything is started and before it opens the embedded data folder', async () => {
      const dataDir = join(mkdtempSync(join(tmpdir(), 'leasehold-port-')), 'pglite');
      const { exit, lines } = await failedStart({ DATABASE_URL: undefined, DATA_DIR: dataDir, PORT: String(port) });
      expect(exit.code).toBe(1);
      expect(errors(lines)).toHaveLength(1);
      expect(String(errors(lines)[0].msg)).toContain(`port ${port} on 127.0.0.1 is already in use`);
      expect(lines.some((line) => /started|Listening|embedded/i.test(String(line.msg)))).toBe(false);
      expect(existsSync(dataDir)).toBe(false);
    });
  });
});

describe('the embedded default', () => {
  it('says it is creating the database on a first start, and a second broker on the same folder exits naming the first', async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'leasehold-first-')), 'pglite');
    const first = await BrokerProcess.start({ DATABASE_URL: undefined, DATA_DIR: dataDir, LOG_FORMAT: 'json' });
    try {
      const messages = first.lines.map((line) => String((JSON.parse(line) as Line).msg));
      const creating = messages.findIndex((message) => message.startsWith('Creating the embedded PostgreSQL'));
      expect(creating).toBeGreaterThanOrEqual(0);
      expect(creating).toBeLessThan(messages.findIndex((message) => message.startsWith('Listening on')));

      const second = BrokerProcess.launch({ DATABASE_URL: undefined, DATA_DIR: dataDir, LOG_FORMAT: 'json' });
      const exit = await within(second.exited, 'the second broker exits', 180_000);
      expect(exit.code).toBe(1);
      const failure = second.lines.map((line) => JSON.parse(line) as Line).find((line) => line.context === 'Leasehold');
      expect(String(failure?.msg)).toMatch(/is in use by process \d+/);
      expect((await fetch(`${first.url}/health/ready`)).status).toBe(200);
    } finally {
      first.kill('SIGTERM');
      await within(first.exited, 'the first broker exits');
    }
  });
});

/** A loopback port with nothing listening on it. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
