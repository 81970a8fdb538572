import { execFile, spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { newTenant, onEmbeddedDatabase, TENANT_HEADER } from '../support/test-app';
import { waitFor, within } from '../support/wait';

const ROOT = join(__dirname, '..', '..');
const SHUTDOWN_TIMEOUT_MS = 5_000;

jest.setTimeout(180_000);

/**
 * What Docker, systemd or Kubernetes do to the README's production command:
 * SIGTERM to the process they started, here `npm start` itself. The broker
 * under it must drain and exit, and npm with it, leaving nothing holding
 * the port.
 */
(onEmbeddedDatabase ? describe.skip : describe)('SIGTERM to `npm start`', () => {
  beforeAll(async () => {
    // npm start runs the build, as production does; make it the build of these sources.
    await promisify(execFile)('npm', ['run', 'build', '--silent'], { cwd: ROOT, timeout: 150_000 });
  });

  it('drains the broker under it (a parked poll answers 503 at once), then both exit 0 and the port is free', async () => {
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: '0',
        HOST: '127.0.0.1',
        TENANT_HEADER,
        SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
        DB_POOL_SIZE: '4',
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    npm.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    npm.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      npm.once('exit', (code, signal) => resolve({ code, signal })),
    );
    try {
      await waitFor(() => /Listening on http:\/\/[\d.]+:\d+/.test(output.join('')), 'the broker listens', 60_000);
      const base = /Listening on (http:\/\/[\d.]+:\d+)/.exec(output.join(''))![1];
      const port = Number(new URL(base).port);
      const brokerPid = await childOf(npm.pid!);

      const tenant = newTenant();
      const headers = { [TENANT_HEADER]: tenant };
      await fetch(`${base}/api/v1/configure`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ queue: 'idle' }),
      });
      const poll = fetch(`${base}/api/v1/pop/queue/idle?wait=true&timeout=60000`, { headers }).then(
        async (response) => ({
          status: response.status,
          body: await response.json(),
          at: performance.now(),
        }),
      );
      await waitFor(
        async () => (await fetch(`${base}/metrics`).then((r) => r.text())).includes('leasehold_parked_polls 1'),
        'the poll parks',
      );

      const signalledAt = performance.now();
      process.kill(npm.pid!, 'SIGTERM');

      const answered = await within(poll, 'the parked poll answers', SHUTDOWN_TIMEOUT_MS);
      expect({ status: answered.status, body: answered.body }).toEqual({
        status: 503,
        body: { error: 'shutting down' },
      });
      const exit = await within(exited, 'npm exits', SHUTDOWN_TIMEOUT_MS + 15_000);
      expect(exit).toEqual({ code: 0, signal: null });
      expect(performance.now() - signalledAt).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 15_000);
      expect(processExists(brokerPid)).toBe(false);
      expect(await portAccepts(port)).toBe(false);
      expect(output.join('')).toMatch(/SIGTERM: shutting down/);
      expect(output.join('')).toMatch(/Stopped/);
    } finally {
      if (npm.exitCode === null) {
        // Whatever it started too, shell or broker, so a failed run leaves nothing holding a port.
        spawnSync('pkill', ['-KILL', '-P', String(npm.pid)]);
        npm.kill('SIGKILL');
      }
    }
  });
});

/** The one child of npm: with `exec` in the script, the broker itself rather than a shell. */
async function childOf(pid: number): Promise<number> {
  const { stdout } = await promisify(execFile)('pgrep', ['-P', String(pid)]);
  const children = stdout.trim().split('\n').filter(Boolean).map(Number);
  expect(children).toHaveLength(1);
  const { stdout: command } = await promisify(execFile)('ps', ['-o', 'args=', '-p', String(children[0])]);
  expect(command).toMatch(/^node .*dist\/src\/main\.js/);
  return children[0];
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
