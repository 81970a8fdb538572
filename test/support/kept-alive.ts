import { connect, Socket } from 'node:net';

/** How one request on a kept-alive connection ended, as its client saw it. */
export interface Exchange {
  /** Undefined when the connection ended before the answer. */
  status?: number;
  headers: Record<string, string>;
  body: string;
  /** Set when no answer came: `reset` (ECONNRESET, EPIPE), or `closed` (the server closed the connection cleanly). */
  lost?: 'reset' | 'closed';
  error?: string;
}

interface Pending {
  resolve: (exchange: Exchange) => void;
}

/**
 * One HTTP/1.1 connection, held open between requests, that can pipeline: requests are written as raw bytes and
 * answers read in order, so a test knows exactly which request each answer, reset or close belongs to.
 */
export class KeptAliveConnection {
  private readonly waiting: Pending[] = [];
  private buffer = Buffer.alloc(0);
  private ended: { lost: 'reset' | 'closed'; error?: string } | undefined;
  /** Set once the server said `Connection: close`: a client sends nothing more on this connection. */
  closeAnnounced = false;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.parse();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => this.end('reset', error.code ?? error.message));
    // The server's FIN: a client sends nothing more, and an answer still awaited will not come.
    socket.on('end', () => this.end('closed'));
    socket.on('close', () => this.end('closed'));
  }

  static async open(port: number): Promise<KeptAliveConnection> {
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return new KeptAliveConnection(socket);
  }

  get open(): boolean {
    return this.ended === undefined && !this.closeAnnounced;
  }

  /**
   * Writes every request in one go (pipelined when more than one); answers in order. Undefined, and nothing written,
   * once the connection is not open any more, as a client would not use it.
   */
  send(requests: string[]): Array<Promise<Exchange>> | undefined {
    if (!this.open) return undefined;
    const answers = requests.map(() => new Promise<Exchange>((resolve) => this.waiting.push({ resolve })));
    this.socket.write(requests.join(''));
    return answers;
  }

  /** Resolves once the connection is closed, by either side. */
  closed(): Promise<void> {
    return new Promise((resolve) => (this.socket.closed ? resolve() : this.socket.once('close', () => resolve())));
  }

  destroy(): void {
    this.socket.destroy();
  }

  private parse(): void {
    for (;;) {
      const headEnd = this.buffer.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const [statusLine, ...lines] = this.buffer.subarray(0, headEnd).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (this.buffer.length < headEnd + 4 + length) return;
      const body = this.buffer.subarray(headEnd + 4, headEnd + 4 + length).toString('utf8');
      this.buffer = this.buffer.subarray(headEnd + 4 + length);
      if (headers.connection?.toLowerCase() === 'close') this.closeAnnounced = true;
      this.waiting.shift()?.resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    }
  }

  private end(lost: 'reset' | 'closed', error?: string): void {
    this.ended ??= { lost, error };
    for (const pending of this.waiting.splice(0)) {
      pending.resolve({ headers: {}, body: '', lost: this.ended.lost, error: this.ended.error });
    }
  }
}
