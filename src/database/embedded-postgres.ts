import { closeSync, existsSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';

export interface EmbeddedPostgresOptions {
  dataDir: string;
  /** 0 picks a free port. */
  port?: number;
  /** Must exceed the pool size, or pooled connections queue at the socket. */
  maxConnections: number;
}

type WorkerMessage = { type: 'ready'; url: string } | { type: 'stopped' } | { type: 'error'; message: string };

/* PGlite's timestamps all ended in 000: in this worker only, Date.now() adds the monotonic clock's microseconds. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const systemNow = Date.now;
let offset = systemNow() - performance.now();
Date.now = () => {
  const ms = systemNow();
  const now = offset + performance.now();
  if (now >= ms && now < ms + 1) return now;
  offset = ms - performance.now();
  return ms;
};
const { PGlite } = require(workerData.pglite);
const { PGLiteSocketServer } = require(workerData.socket);
let db;
let server;
parentPort.on('message', async (message) => {
  if (message !== 'stop') return;
  try {
    if (server) await server.stop();
    if (db && !db.closed) await db.close();
    parentPort.postMessage({ type: 'stopped' });
  } catch (error) {
    parentPort.postMessage({ type: 'error', message: String(error && error.message || error) });
  }
});
(async () => {
  db = await PGlite.create(workerData.dataDir);
  server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: workerData.port, maxConnections: workerData.maxConnections });
  await server.start();
  parentPort.postMessage({ type: 'ready', url: 'postgres://postgres@' + server.getServerConn() + '/postgres' });
})().catch((error) => parentPort.postMessage({ type: 'error', message: String(error && error.message || error) }));
`;

/** PGlite runs statements synchronously: in a worker thread, so they do not stall every request. */
export class EmbeddedPostgres {
  private constructor(
    private readonly worker: Worker,
    private readonly lock: DataDirLock,
    readonly url: string,
  ) {}

  static isNew(dataDir: string): boolean {
    return !existsSync(join(resolve(dataDir), 'PG_VERSION'));
  }

  static async start(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
    const dataDir = resolve(options.dataDir);
    mkdirSync(dataDir, { recursive: true });
    const lock = DataDirLock.take(dataDir);
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        pglite: require.resolve('@electric-sql/pglite'),
        socket: require.resolve('@electric-sql/pglite-socket'),
        dataDir,
        port: options.port ?? 0,
        maxConnections: options.maxConnections,
      },
    });
    try {
      const url = await untilStarted(worker);
      // An unexpected failure later shows up as connections refused: the pool reports it per request.
      worker.on('error', () => undefined);
      return new EmbeddedPostgres(worker, lock, url);
    } catch (error) {
      await worker.terminate();
      lock.release();
      throw error;
    }
  }

  async stop(): Promise<void> {
    try {
      await new Promise<void>((resolveStop, reject) => {
        this.worker.on('message', (message: WorkerMessage) => {
          if (message.type === 'stopped') resolveStop();
          if (message.type === 'error') reject(new Error(message.message));
        });
        this.worker.once('exit', () => resolveStop());
        this.worker.postMessage('stop');
      });
    } finally {
      await this.worker.terminate();
      this.lock.release();
    }
  }
}

function untilStarted(worker: Worker): Promise<string> {
  return new Promise<string>((resolveUrl, reject) => {
    const onMessage = (message: WorkerMessage): void => {
      if (message.type === 'ready') settle(() => resolveUrl(message.url));
      if (message.type === 'error')
        settle(() => reject(new Error(`the embedded database failed to start: ${message.message}`)));
    };
    const onError = (error: Error): void => settle(() => reject(error));
    const onExit = (code: number): void =>
      settle(() => reject(new Error(`the embedded database stopped while starting (exit ${code})`)));
    const settle = (done: () => void): void => {
      worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      done();
    };
    worker.on('message', onMessage).on('error', onError).on('exit', onExit);
  });
}

/** `<data folder>.lock`, holding the pid of the process that has the folder open. */
class DataDirLock {
  private constructor(private readonly path: string) {}

  static take(dataDir: string): DataDirLock {
    const path = `${dataDir}.lock`;
    for (let attempt = 0; attempt < 2; attempt += 1) {
      try {
        const fd = openSync(path, 'wx');
        writeSync(fd, String(process.pid));
        closeSync(fd);
        return new DataDirLock(path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const holder = Number(readFileSync(path, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && isAlive(holder)) {
        throw new Error(`${dataDir} is in use by process ${holder}; stop it or set DATA_DIR to another folder`);
      }
      unlinkSync(path);
    }
    throw new Error(`cannot lock ${dataDir}`);
  }

  release(): void {
    try {
      unlinkSync(this.path);
    } catch {
      // Already gone.
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
