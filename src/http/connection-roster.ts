import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const TRUSTED = Symbol('leasehold:trusted-connection');
const IN_FLIGHT = Symbol('leasehold:requests-in-flight');

type TrackedSocket = Socket & { [TRUSTED]?: boolean; [IN_FLIGHT]?: number };

/** A request on this connection got past authentication: the connection keeps its place when the server is full. */
export function trustConnection(request: IncomingMessage): void {
  const socket = request.socket as TrackedSocket | undefined;
  if (socket) socket[TRUSTED] = true;
}

/**
 * The server's connections, capped at HTTP_MAX_CONNECTIONS so that room is
 * kept for callers who proved who they are. A connection arriving at the
 * cap closes the oldest one that has neither authenticated a request nor a
 * request in flight (a slow-header flood, idle anonymous keep-alives);
 * only when there is none is the newcomer closed. A newcomer sends its
 * request at once and is then in flight, so a flood of sockets that never
 * finish their headers, however fast they reconnect, takes its own places
 * only, and never a client's that is authenticated or being served.
 */
export class ConnectionRoster {
  /** Connections not (yet) trusted, oldest first. */
  private readonly untrusted = new Set<TrackedSocket>();
  private open = 0;

  constructor(private readonly maxConnections: number) {}

  admit(socket: TrackedSocket): void {
    this.open += 1;
    this.untrusted.add(socket);
    socket.once('close', () => {
      this.open -= 1;
      this.untrusted.delete(socket);
    });
    if (this.open <= this.maxConnections) return;
    for (const candidate of this.untrusted) {
      if (candidate === socket || candidate[TRUSTED] || (candidate[IN_FLIGHT] ?? 0) > 0) continue;
      candidate.destroy();
      return;
    }
    socket.destroy();
  }

  /** A request arrived on the socket: it stays until that request is answered. */
  serving(request: IncomingMessage, response: ServerResponse): void {
    const socket = request.socket as TrackedSocket;
    socket[IN_FLIGHT] = (socket[IN_FLIGHT] ?? 0) + 1;
    response.once('close', () => {
      socket[IN_FLIGHT]! -= 1;
      if (socket[TRUSTED]) this.untrusted.delete(socket);
    });
  }
}
