import { AddressInfo, Server, Socket, connect, createServer } from 'node:net';
import { Client } from 'pg';
import { sleep } from './support/sleep';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor as waitUntil, within as withinTime } from './support/wait';

/** Generous: the machine is shared, and these bounds only catch a hang. */
const PATIENCE_MS = 10_000;
const waitFor = (condition: () => boolean, what: string): Promise<void> => waitUntil(condition, what, PATIENCE_MS);
const within = <T>(promise: Promise<T>, what: string): Promise<T> => withinTime(promise, what, PATIENCE_MS);
/** Absence can only be shown by waiting; on loopback anything forwarded arrives far sooner. */
const QUIET_MS = 300;

/** One end of a connection, recording what it got and how it was closed. */
class Peer {
  private readonly chunks: Buffer[] = [];
  readonly events: string[] = [];
  error: NodeJS.ErrnoException | undefined;
  /** What had arrived when the FIN did. */
  textAtEnd: string | undefined;

  constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.chunks.push(chunk);
      this.events.push('data');
    });
    socket.on('end', () => {
      this.textAtEnd = this.text;
      this.events.push('end');
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      this.error = error;
      this.events.push('error');
    });
    socket.on('close', () => this.events.push('close'));
  }

  get text(): string {
    return Buffer.concat(this.chunks).toString('latin1');
  }

  get ended(): boolean {
    return this.events.includes('end');
  }

  get closed(): boolean {
    return this.events.includes('close');
  }
}

/** The server behind the proxy: records every connection, and echoes when asked to. */
class Target {
  readonly peers: Peer[] = [];
  echo = false;
  private readonly server: Server;

  constructor() {
    this.server = createServer({ allowHalfOpen: true }, (socket) => {
      this.peers.push(new Peer(socket));
      socket.on('data', (chunk: Buffer) => {
        if (this.echo) socket.write(chunk);
      });
    });
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  async close(): Promise<void> {
    for (const peer of this.peers) peer.socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Many small writes, each its own chunk, so order is tested across chunks rather than within one. */
async function writeInPieces(socket: Socket, pieces: string[]): Promise<void> {
  for (const piece of pieces) {
    socket.write(piece);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const pieces = (prefix: string, count: number): string[] =>
  Array.from({ length: count }, (_, index) => `${prefix}${index};`);

function startupMessage(): Buffer {
  const parameters = Buffer.from('user\0postgres\0database\0postgres\0\0', 'latin1');
  const header = Buffer.alloc(8);
  header.writeInt32BE(8 + parameters.length, 0);
  header.writeInt32BE(196608, 4);
  return Buffer.concat([header, parameters]);
}

describe('TcpProxy', () => {
  let target: Target;
  let proxy: TcpProxy;
  let clients: Socket[];

  const dial = async (): Promise<Peer> => {
    const socket = connect(proxy.port, '127.0.0.1');
    clients.push(socket);
    const peer = new Peer(socket);
    await within(new Promise((resolve) => socket.once('connect', resolve)), 'connect to the proxy');
    return peer;
  };

  /** A connection through the proxy and the target's end of it, shown to carry bytes. */
  const connected = async (): Promise<{ client: Peer; server: Peer }> => {
    const before = target.peers.length;
    const client = await dial();
    client.socket.write('hello');
    await waitFor(() => target.peers[before]?.text === 'hello', 'the target gets the hello');
    return { client, server: target.peers[before] };
  };

  beforeEach(async () => {
    target = new Target();
    await target.listen();
    proxy = new TcpProxy('127.0.0.1', target.port);
    await proxy.start();
    clients = [];
  });

  afterEach(async () => {
    for (const socket of clients) socket.destroy();
    await proxy.stop();
    await target.close();
  });

  it('forwards both ways, and passes a close on', async () => {
    const { client, server } = await connected();
    server.socket.write('hi back');
    await waitFor(() => client.text === 'hi back', 'the client gets the answer');

    client.socket.end();
    await waitFor(() => server.ended, 'the target sees the client end');
    expect(server.textAtEnd).toBe('hello');
  });

  describe('stall()', () => {
    it('holds what either side sends until heal(), then delivers all of it in order', async () => {
      const { client, server } = await connected();
      proxy.stall();
      await writeInPieces(client.socket, pieces('up', 30));
      await writeInPieces(server.socket, pieces('down', 30));
      await sleep(QUIET_MS);
      expect(server.text).toBe('hello');
      expect(client.text).toBe('');

      proxy.heal();
      const upstream = `hello${pieces('up', 30).join('')}`;
      const downstream = pieces('down', 30).join('');
      await waitFor(() => server.text === upstream && client.text === downstream, 'the held bytes arrive');

      client.socket.write('after');
      await waitFor(() => server.text === `${upstream}after`, 'bytes after heal() pass straight through');
    });

    it('connects a connection opened during the stall only at heal(), with what it sent', async () => {
      proxy.stall();
      const client = await dial();
      client.socket.write('early');
      await sleep(QUIET_MS);
      expect(target.peers).toHaveLength(0);

      proxy.heal();
      await waitFor(() => target.peers[0]?.text === 'early', 'the target gets the connection and its bytes');
      target.peers[0].socket.write('welcome');
      await waitFor(() => client.text === 'welcome', 'the answer reaches the client');
    });

    it('passes a close made during the stall on only at heal(), after the bytes sent before it', async () => {
      const { client, server } = await connected();
      proxy.stall();
      client.socket.write(' last words');
      client.socket.end();
      server.socket.write('goodbye');
      server.socket.end();
      await sleep(QUIET_MS);
      expect(server.text).toBe('hello');
      expect(server.ended).toBe(false);
      expect(client.text).toBe('');
      expect(client.ended).toBe(false);

      proxy.heal();
      await waitFor(() => server.ended && client.ended, 'both ends see the other close');
      expect(server.textAtEnd).toBe('hello last words');
      expect(client.textAtEnd).toBe('goodbye');
    });

    it('at heal(), connects a connection that closed during the stall if it sent bytes, else drops it', async () => {
      proxy.stall();
      const silent = await dial();
      silent.socket.end();
      const talker = await dial();
      talker.socket.write('parting shot');
      talker.socket.destroy();
      await sleep(QUIET_MS);
      expect(target.peers).toHaveLength(0);

      proxy.heal();
      await waitFor(() => target.peers[0]?.ended === true, 'the target gets the closed connection');
      expect(target.peers[0].textAtEnd).toBe('parting shot');
      await waitFor(() => silent.closed, 'the empty connection is dropped');
      await sleep(QUIET_MS);
      expect(target.peers).toHaveLength(1);
    });

    it('is undone by heal() however often it is called', async () => {
      const { client, server } = await connected();
      proxy.heal();
      proxy.stall();
      proxy.heal();
      proxy.heal();
      client.socket.write(' again');
      await waitFor(() => server.text === 'hello again', 'bytes pass after heal()');
    });
  });

  describe('stallWhen()', () => {
    it('stalls before the chunk that completes the match, even split across chunks, until heal()', async () => {
      const { client, server } = await connected();
      const stalled = proxy.stallWhen('COMMIT');
      client.socket.write(' BEGIN; UPDATE t; COM');
      await waitFor(() => server.text === 'hello BEGIN; UPDATE t; COM', 'the bytes before the match arrive');
      client.socket.write('MIT;');
      await within(stalled, 'the trigger fires');
      server.socket.write('late answer');
      await sleep(QUIET_MS);
      expect(server.text).toBe('hello BEGIN; UPDATE t; COM');
      expect(client.text).toBe('');

      proxy.heal();
      await waitFor(() => server.text === 'hello BEGIN; UPDATE t; COMMIT;', 'the held chunk arrives');
      await waitFor(() => client.text === 'late answer', 'the held answer arrives');

      // One-shot: the same statement again passes straight through.
      client.socket.write(' COMMIT;');
      await waitFor(() => server.text.endsWith('COMMIT; COMMIT;'), 'a second match is not held');
    });

    it('fires on a pattern, and only on bytes sent after it was armed', async () => {
      const { client, server } = await connected();
      client.socket.write(' commit');
      await waitFor(() => server.text === 'hello commit', 'the first commit arrives');
      let fired = false;
      const stalled = proxy.stallWhen(/commit/i).then(() => {
        fired = true;
      });
      client.socket.write(' select');
      await waitFor(() => server.text === 'hello commit select', 'a chunk without a new match passes');
      expect(fired).toBe(false);

      client.socket.write(' COMMIT');
      await within(stalled, 'the trigger fires');
      await sleep(QUIET_MS);
      expect(server.text).toBe('hello commit select');
      proxy.heal();
      await waitFor(() => server.text === 'hello commit select COMMIT', 'the held chunk arrives');
    });
  });

  describe('resetWhen()', () => {
    it('passes the matching chunk to the server, then resets the connection', async () => {
      const { client, server } = await connected();
      const reset = proxy.resetWhen('DROP TABLE');
      client.socket.write(' SELECT 1;');
      await waitFor(() => server.text === 'hello SELECT 1;', 'the bytes before the match arrive');
      client.socket.write(' DROP TABLE t;');
      await within(reset, 'the reset');

      // libuv reports an RST that arrives with unread data as EOF, so the target may see 'end' instead.
      await waitFor(() => client.closed && (server.ended || server.closed), 'both ends are cut');
      expect(server.text).toBe('hello SELECT 1; DROP TABLE t;');
      expect(client.error?.code).toBe('ECONNRESET');
      expect(client.ended).toBe(false);
    });
  });

  describe('delay()', () => {
    it('adds the delay to each direction, keeping the order, until set back to 0', async () => {
      target.echo = true;
      const client = await dial();
      const delayMs = 150;
      proxy.delay(delayMs);
      const sentAt = Date.now();
      client.socket.write('ping');
      await waitFor(() => client.text === 'ping', 'the echo');
      expect(Date.now() - sentAt).toBeGreaterThanOrEqual(2 * delayMs);

      const sent = pieces('n', 30);
      await writeInPieces(client.socket, sent);
      await waitFor(() => client.text === `ping${sent.join('')}`, 'every piece echoed, in order');

      proxy.delay(0);
      client.socket.write('!');
      await waitFor(() => client.text.endsWith(';!'), 'the echo without delay');
    });
  });

  describe('recovering()', () => {
    it('refuses new PostgreSQL connections with 57P03, leaves open ones alone, and stops when turned off', async () => {
      const { client: open, server: openServer } = await connected();
      proxy.recovering();

      const pg = new Client({
        host: '127.0.0.1',
        port: proxy.port,
        user: 'postgres',
        database: 'postgres',
        connectionTimeoutMillis: PATIENCE_MS,
      });
      pg.on('error', () => undefined);
      await expect(pg.connect()).rejects.toMatchObject({
        code: '57P03',
        severity: 'FATAL',
        message: 'the database system is in recovery mode',
      });
      await pg.end().catch(() => undefined);
      expect(target.peers).toHaveLength(1);

      open.socket.write(' still here');
      await waitFor(() => openServer.text === 'hello still here', 'the connection opened before still forwards');

      proxy.recovering(false);
      const later = await dial();
      later.socket.write('back');
      await waitFor(() => target.peers[1]?.text === 'back', 'a new connection reaches the target');
    });

    it("answers an SSLRequest with 'N', then the startup message with an ErrorResponse, and closes", async () => {
      proxy.recovering();
      const client = await dial();
      const sslRequest = Buffer.alloc(8);
      sslRequest.writeInt32BE(8, 0);
      sslRequest.writeInt32BE(80877103, 4);
      client.socket.write(sslRequest);
      await waitFor(() => client.text === 'N', "the 'N'");
      client.socket.write(startupMessage());
      await waitFor(() => client.ended, 'the close after the error');

      const fields = 'SFATAL\0VFATAL\0C57P03\0Mthe database system is in recovery mode\0\0';
      const length = Buffer.alloc(4);
      length.writeInt32BE(4 + fields.length, 0);
      expect(client.textAtEnd).toBe(`NE${length.toString('latin1')}${fields}`);
      expect(target.peers).toHaveLength(0);
    });
  });

  it('silence() drops what is in flight, and new connections never reach the server', async () => {
    const { client, server } = await connected();
    proxy.silence();
    client.socket.write(' lost');
    server.socket.write('lost too');
    const late = await dial();
    late.socket.write('never');
    await sleep(QUIET_MS);
    expect(server.text).toBe('hello');
    expect(client.text).toBe('');
    expect(target.peers).toHaveLength(1);
    expect(late.closed).toBe(false);
  });

  it('stop() forgets every fault, so a restarted proxy forwards at once', async () => {
    target.echo = true;
    proxy.stall();
    proxy.delay(PATIENCE_MS * 2);
    proxy.recovering();
    void proxy.stallWhen('ping');
    void proxy.resetWhen('ping');
    await proxy.stop();
    await proxy.start();

    const client = await dial();
    client.socket.write('ping');
    await waitFor(() => client.text === 'ping', 'the echo through the restarted proxy');
    expect(target.peers).toHaveLength(1);
  });
});
