import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

export interface EmbeddedPostgresOptions {
  dataDir: string;
  /** 0 picks a free port. */
  port?: number;
  /** Must exceed the pool size, or pooled connections queue at the socket. */
  maxConnections: number;
}

/**
 * PostgreSQL compiled to WebAssembly (PGlite), served on a loopback socket so
 * the broker reaches it through the same `pg` driver and SQL as a real server.
 * PGlite is a single backend: the socket server runs one transaction at a
 * time, so this is the zero-setup default, not the production target.
 */
export class EmbeddedPostgres {
  private constructor(
    private readonly db: PGlite,
    private readonly server: PGLiteSocketServer,
    readonly url: string,
  ) {}

  static async start(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
    const dataDir = resolve(options.dataDir);
    mkdirSync(dataDir, { recursive: true });
    const db = await PGlite.create(dataDir);
    const server = new PGLiteSocketServer({
      db,
      host: '127.0.0.1',
      port: options.port ?? 0,
      maxConnections: options.maxConnections,
    });
    await server.start();
    return new EmbeddedPostgres(db, server, `postgres://postgres@${server.getServerConn()}/postgres`);
  }

  async stop(): Promise<void> {
    await this.server.stop();
    if (!this.db.closed) {
      await this.db.close();
    }
  }
}
