import { createServer, Server, Socket, connect } from 'node:net';

/**
 * A loopback TCP proxy in front of a server (the test database, or the broker
 * for a client), so a test can make it unreachable (and reachable again) for
 * one app instance or client without touching what every other test is using.
 */
export class TcpProxy {
  private readonly sockets = new Set<Socket>();
  private readonly pairs = new Set<[Socket, Socket]>();
  private server: Server | undefined;
  private silent = false;
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
    const server = createServer((client) => {
      this.track(client);
      if (this.silent) {
        client.resume();
        return;
      }
      const upstream = connect(this.targetPort, this.targetHost);
      this.track(upstream);
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      client.pipe(upstream).pipe(client);
      client.on('close', () => {
        this.pairs.delete(pair);
        upstream.destroy();
      });
      upstream.on('close', () => client.destroy());
    });
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
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      // Read and discard, so what is in flight is swallowed rather than buffered for later.
      client.resume();
      upstream.resume();
    }
  }

  /** Stops listening and cuts every open connection. */
  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    this.pairs.clear();
    this.silent = false;
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }
}
