import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { within } from '../../support/wait';

const ROOT = join(__dirname, '..', '..', '..');

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

/**
 * A broker in a process of its own, started from the sources the way
 * `npm start` runs the build (src/main.ts, its own signal handling), so a
 * test can send it SIGTERM or SIGKILL.
 */
export class BrokerProcess {
  readonly lines: string[] = [];
  readonly exited: Promise<Exit>;
  url = '';
  private readonly waiters: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];

  private constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal, at: performance.now() })),
    );
    let partial = '';
    const onOutput = (chunk: Buffer): void => {
      const text = partial + chunk.toString('utf8');
      const lines = text.split('\n');
      partial = lines.pop()!;
      for (const line of lines) this.onLine(line);
    };
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', onOutput);
  }

  /**
   * Started, and listening: found from its "Listening on" log line, or, when
   * env.PORT is set (its logs may be quieter than info), from its liveness probe.
   */
  static async start(env: Record<string, string | undefined>): Promise<BrokerProcess> {
    const broker = BrokerProcess.launch(env);
    const fixedPort = env.PORT !== undefined && env.PORT !== '0' ? `http://127.0.0.1:${env.PORT}` : undefined;
    const started = fixedPort
      ? untilLive(fixedPort).then(() => `Listening on ${fixedPort}`)
      : broker.waitForLine(/Listening on (http:\/\/[\d.]+:\d+)/);
    const line = await within(
      Promise.race([
        started,
        broker.exited.then((exit) => {
          throw new Error(`broker exited (${exit.code ?? exit.signal}) before listening:\n${broker.lines.join('\n')}`);
        }),
      ]),
      'the broker starts',
      // Compiling the sources on the fly and creating a database take a minute or more on a busy machine.
      180_000,
    );
    broker.url = /Listening on (http:\/\/[\d.]+:\d+)/.exec(line)![1];
    return broker;
  }

  /** The process, not waiting for anything: for starts that are meant to fail. `cwd` is where it looks for `.env`. */
  static launch(env: Record<string, string | undefined>, options: { cwd?: string } = {}): BrokerProcess {
    const child = spawn(
      process.execPath,
      ['-r', join(ROOT, 'test/support/ts-register.js'), join(ROOT, 'src/main.ts')],
      {
        cwd: options.cwd ?? ROOT,
        // Unregistered like createTestApp's brokers: tests sharing the database must not divide each other's limits.
        env: { ...process.env, PORT: '0', HOST: '127.0.0.1', NO_COLOR: '1', BROKER_HEARTBEAT_MS: '0', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    return new BrokerProcess(child);
  }

  /** The first line (already printed or still to come) matching the pattern. */
  waitForLine(pattern: RegExp): Promise<string> {
    const seen = this.lines.find((line) => pattern.test(line));
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ pattern, resolve }));
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Stops it if a test left it running. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }

  private onLine(line: string): void {
    this.lines.push(line);
    for (const waiter of [...this.waiters]) {
      if (waiter.pattern.test(line)) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  }
}

async function untilLive(base: string): Promise<void> {
  for (;;) {
    const live = await fetch(`${base}/health/live`).then(
      (response) => response.ok,
      () => false,
    );
    if (live) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
