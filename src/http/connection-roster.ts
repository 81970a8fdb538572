import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const TRUSTED = Symbol('leasehold:trusted-connection');
const IN_FLIGHT = Symbol('leasehold:answers-in-flight');

type TrackedSocket = Socket & { [TRUSTED]?: boolean; [IN_FLIGHT]?: Set<ServerResponse>; parser?: HttpParser | null };

type HeadersComplete = (this: HttpParser, ...args: unknown[]) => unknown;
type HttpParser = { socket: Socket | null } & Record<number, HeadersComplete>;

/** Node's own parser binding; absent on a runtime that does not expose it, where a cut only closes. */
const ON_HEADERS_COMPLETE: number | undefined = (() => {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return (require('_http_common') as { HTTPParser?: { kOnHeadersComplete?: number } }).HTTPParser?.kOnHeadersComplete;
  } catch {
    return undefined;
  }
})();

/** Also stops Node building the rest of the parsed chunk: 2,000 pipelined GETs cost 80 ms of CPU, the parser 5. */
export function cut(socket: TrackedSocket): void {
  socket.destroy();
  const parser = socket.parser;
  if (!parser || ON_HEADERS_COMPLETE === undefined) return;
  const original = parser[ON_HEADERS_COMPLETE];
  if (typeof original !== 'function') return;
  // Parsers are pooled: the next connection that gets this one puts Node's callback back.
  parser[ON_HEADERS_COMPLETE] = function (this: HttpParser, ...args: unknown[]) {
    if (this.socket === socket) return 0;
    parser[ON_HEADERS_COMPLETE] = original;
    return original.apply(this, args);
  };
}

/** One socket pipelining GET /health 100,000 times ran the process out of memory: Node starts each as it is parsed. */
export const MAX_PIPELINED_REQUESTS = 8;

/** A request on this connection got past authentication: the connection keeps its place when the server is full. */
export function trustConnection(request: IncomingMessage): void {
  const socket = request.socket as TrackedSocket | undefined;
  if (socket) socket[TRUSTED] = true;
}

/** When full, a newcomer closes the oldest idle untrusted connection: a slow-header flood takes only its own places. */
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
      // Node never closes the answers queued behind the one being sent: whatever waits for them would wait forever.
      process.nextTick(() => [...(socket[IN_FLIGHT] ?? [])].forEach((response) => response.emit('close')));
    });
    if (this.open <= this.maxConnections) return;
    for (const candidate of this.untrusted) {
      if (candidate === socket || candidate[TRUSTED] || (candidate[IN_FLIGHT]?.size ?? 0) > 0) continue;
      cut(candidate);
      return;
    }
    cut(socket);
  }

  /** False when the request must not be served: its connection is gone, or was closed for pipelining too far ahead. */
  serving(request: IncomingMessage, response: ServerResponse): boolean {
    const socket = request.socket as TrackedSocket;
    if (socket.destroyed) return false;
    const inFlight = (socket[IN_FLIGHT] ??= new Set());
    if (inFlight.size >= MAX_PIPELINED_REQUESTS) {
      cut(socket);
      return false;
    }
    inFlight.add(response);
    response.once('close', () => {
      inFlight.delete(response);
      if (socket[TRUSTED]) this.untrusted.delete(socket);
    });
    return true;
  }
}
