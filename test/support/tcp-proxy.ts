import { createServer, Server, Socket, connect } from 'node:net';

type Close = 'end' | 'destroy';

interface Chunk {
  data: Buffer;
  due: number;
  written?: () => void;
}

class Lane {
  readonly queue: Chunk[] = [];
  from: Socket | undefined;
  to: Socket | undefined;
  close: Close | undefined;
  propagated: Close | undefined;
  dead = false;
  timer: NodeJS.Timeout | undefined;
}

interface Connection {
  client: Socket;
  upstream: Socket | undefined;
  up: Lane;
  down: Lane;
  /** The tail of what the client sent, so a match split across chunks is still found. */
  window: Buffer;
}

interface Trigger {
  kind: 'stall' | 'reset';
  match: string | RegExp;
  fired: () => void;
}

const WINDOW_BYTES = 256;
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

function errorResponse(fields: Record<string, string>): Buffer {
  const body = Buffer.concat([
    ...Object.entries(fields).map(([type, value]) => Buffer.from(`${type}${value}\0`, 'utf8')),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

const IN_RECOVERY = errorResponse({
  S: 'FATAL',
  V: 'FATAL',
  C: '57P03',
  M: 'the database system is in recovery mode',
});

/** Only a match ending past `from` counts, so bytes that went through before a trigger was armed cannot fire it. */
function occursAfter(text: string, from: number, match: string | RegExp): boolean {
  if (typeof match === 'string') return text.indexOf(match, Math.max(0, from - match.length + 1)) !== -1;
  const flags = match.flags.replace(/[gy]/g, '');
  const pattern = new RegExp(match.source, `${flags}g`);
  for (let found = pattern.exec(text); found; found = pattern.exec(text)) {
    if (found.index + found[0].length > from) return true;
    if (found[0].length === 0) pattern.lastIndex++;
  }
  return false;
}

/**
 * A loopback TCP proxy in front of a server (the test database, or the broker
 * for a client), so a test can make it unreachable (and reachable again) for
 * one app instance or client without touching what every other test is using.
 */
export class TcpProxy {
  private readonly sockets = new Set<Socket>();
  private readonly connections = new Set<Connection>();
  private readonly triggers: Trigger[] = [];
  private server: Server | undefined;
  private silent = false;
  private stalled = false;
  private latencyMs = 0;
  private inRecovery = false;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  static forDatabaseUrl(url: string): TcpProxy {
    const parsed = new URL(url);
    return new TcpProxy(parsed.hostname, Number(parsed.port || 5432));
  }

  /** The database URL with the proxy's port in place of the server's. */
  rewrite(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }

  async start(): Promise<void> {
    // Half-open sockets, so each side's FIN can be held back by a stall and passed on later.
    const server = createServer({ allowHalfOpen: true }, (client) => this.accept(client));
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  /**
   * Lets nothing through any more, in either direction, on open connections
   * and new ones alike: a network that drops every packet, where a request
   * neither fails nor answers. Unlike stop(), nothing is refused or reset.
   */
  silence(): void {
    this.silent = true;
    for (const { up, down } of this.connections) {
      for (const lane of [up, down]) {
        lane.queue.length = 0;
        lane.from?.resume();
      }
    }
  }

  /** A partition that loses nothing: bytes, new connections and closes are held, in order, until heal(). */
  stall(): void {
    this.stalled = true;
  }

  /** Stalls just before the first client chunk containing `match` is passed on; that chunk waits for heal(). */
  stallWhen(match: string | RegExp): Promise<void> {
    return new Promise((fired) => this.triggers.push({ kind: 'stall', match, fired }));
  }

  /** Passes on the first client chunk containing `match`, then resets both sockets of that connection. */
  resetWhen(match: string | RegExp): Promise<void> {
    return new Promise((fired) => this.triggers.push({ kind: 'reset', match, fired }));
  }

  /** Ends a stall: delivers what was held, then the closes held behind it. */
  heal(): void {
    if (!this.stalled) return;
    this.stalled = false;
    for (const connection of [...this.connections]) {
      if (!connection.upstream) {
        if (connection.up.close && connection.up.queue.length === 0) {
          connection.client.destroy();
          this.connections.delete(connection);
          continue;
        }
        if (this.silent) continue;
        this.connectUpstream(connection);
      }
      this.pump(connection.up);
      this.pump(connection.down);
    }
  }

  /** Holds every chunk, both ways, `ms` longer before passing it on; 0 turns it off. */
  delay(ms: number): void {
    this.latencyMs = ms;
  }

  /** New connections are refused the way PostgreSQL refuses them during crash recovery (57P03). */
  recovering(on = true): void {
    this.inRecovery = on;
  }

  /** Stops listening, cuts every open connection, and forgets every fault. */
  async stop(): Promise<void> {
    this.silent = false;
    this.stalled = false;
    this.latencyMs = 0;
    this.inRecovery = false;
    this.triggers.length = 0;
    for (const { up, down } of this.connections) {
      clearTimeout(up.timer);
      clearTimeout(down.timer);
    }
    this.connections.clear();
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    this.track(client);
    if (this.silent) {
      client.resume();
      client.on('end', () => client.end());
      return;
    }
    if (this.inRecovery) {
      this.answerInRecovery(client);
      return;
    }
    const connection: Connection = {
      client,
      upstream: undefined,
      up: new Lane(),
      down: new Lane(),
      window: Buffer.alloc(0),
    };
    connection.up.from = client;
    connection.down.to = client;
    this.connections.add(connection);
    client.on('data', (chunk: Buffer) => this.fromClient(connection, chunk));
    this.watch(connection, client, connection.up, connection.down);
    // During a stall the client's connect succeeds, as on loopback, but the server hears of it only at heal.
    if (!this.stalled) this.connectUpstream(connection);
  }

  private connectUpstream(connection: Connection): void {
    const upstream = connect({ port: this.targetPort, host: this.targetHost, allowHalfOpen: true });
    this.track(upstream);
    connection.upstream = upstream;
    connection.up.to = upstream;
    connection.down.from = upstream;
    upstream.on('data', (chunk: Buffer) => this.send(connection.down, chunk));
    this.watch(connection, upstream, connection.down, connection.up);
  }

  private watch(connection: Connection, socket: Socket, out: Lane, back: Lane): void {
    socket.on('end', () => {
      out.close ??= 'end';
      this.pump(out);
    });
    socket.on('close', () => {
      out.close = 'destroy';
      back.dead = true;
      back.queue.length = 0;
      clearTimeout(back.timer);
      this.pump(out);
      if (connection.client.closed && connection.upstream?.closed) this.connections.delete(connection);
    });
  }

  private fromClient(connection: Connection, chunk: Buffer): void {
    if (this.silent || connection.up.dead) return;
    const before = connection.window;
    const seen = Buffer.concat([before, chunk]);
    connection.window = seen.subarray(Math.max(0, seen.length - WINDOW_BYTES));
    if (this.triggers.length === 0) {
      this.send(connection.up, chunk);
      return;
    }
    const text = seen.toString('latin1');
    const fired = this.triggers.filter((trigger) => occursAfter(text, before.length, trigger.match));
    if (fired.length === 0) {
      this.send(connection.up, chunk);
      return;
    }
    for (const trigger of fired) this.triggers.splice(this.triggers.indexOf(trigger), 1);
    const resets = fired.filter((trigger) => trigger.kind === 'reset');
    if (resets.length < fired.length) {
      this.stall();
      for (const trigger of fired) if (trigger.kind === 'stall') trigger.fired();
    }
    if (resets.length === 0) {
      this.send(connection.up, chunk);
      return;
    }
    // Reset only once the chunk is in the kernel, so the server gets the statement before the RST.
    this.send(connection.up, chunk, () =>
      setImmediate(() => {
        for (const socket of [connection.client, connection.upstream]) {
          if (socket && !socket.destroyed) socket.resetAndDestroy();
        }
        for (const trigger of resets) trigger.fired();
      }),
    );
  }

  private send(lane: Lane, data: Buffer, written?: () => void): void {
    if (this.silent || lane.dead) return;
    lane.queue.push({ data, due: Date.now() + this.latencyMs, written });
    this.pump(lane);
  }

  private pump(lane: Lane): void {
    const to = lane.to;
    if (this.stalled || !to || to.destroyed || lane.dead) return;
    clearTimeout(lane.timer);
    lane.timer = undefined;
    while (lane.queue.length > 0) {
      // Waiting on the head keeps the order even when the delay is shortened mid-flight.
      const wait = lane.queue[0].due - Date.now();
      if (wait > 0) {
        lane.timer = setTimeout(() => this.pump(lane), wait);
        return;
      }
      const { data, written } = lane.queue.shift()!;
      const flowing = to.write(data, written);
      const from = lane.from;
      if (!flowing && from && !from.isPaused()) {
        from.pause();
        to.once('drain', () => from.resume());
      }
    }
    if (lane.close === 'destroy' && lane.propagated !== 'destroy') {
      lane.propagated = 'destroy';
      to.destroySoon();
    } else if (lane.close === 'end' && !lane.propagated) {
      lane.propagated = 'end';
      to.end();
    }
  }

  private answerInRecovery(client: Socket): void {
    let pending = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 8 && client.writable) {
        const length = pending.readInt32BE(0);
        if (length < 8) {
          client.destroy();
          return;
        }
        if (pending.length < length) return;
        const code = pending.readInt32BE(4);
        pending = pending.subarray(length);
        if (length === 8 && (code === SSL_REQUEST || code === GSSENC_REQUEST)) {
          client.write('N');
          continue;
        }
        client.end(IN_RECOVERY);
      }
    });
    client.on('end', () => client.end());
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }
}
