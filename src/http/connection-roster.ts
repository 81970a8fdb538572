import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const TRUSTED = Symbol('leasehold:trusted-connection');
const IN_FLIGHT = Symbol('leasehold:answers-in-flight');
const ROSTER = Symbol('leasehold:roster');
/** Requests in flight on a connection, by tenant: a gateway may carry several tenants on one connection. */
const TENANTS = Symbol('leasehold:tenants-on-connection');
const COUNTED = Symbol('leasehold:counted-for-tenant');

type TrackedSocket = Socket & {
  [TRUSTED]?: boolean;
  [IN_FLIGHT]?: Set<ServerResponse>;
  [ROSTER]?: ConnectionRoster;
  [TENANTS]?: Map<string, number>;
  parser?: HttpParser | null;
};

/** Which per-tenant limit a request met: the connections carrying its tenant's requests, or its requests in flight. */
export type TenantLimit = 'connections' | 'requests';

export interface TenantShares {
  connections: number;
  requests: number;
}

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

/** Whether no later request on its connection awaits an answer: the one answer that may say `Connection: close`. */
export function answersLastOnItsConnection(response: ServerResponse): boolean {
  const socket = response.req?.socket as TrackedSocket | null | undefined;
  let last: ServerResponse | undefined;
  for (const queued of socket?.[IN_FLIGHT] ?? []) last = queued;
  return last === undefined || last === response;
}

/**
 * A request got past authentication: counted against its tenant's shares until it is answered, and its connection
 * keeps its place when the server is full. Undefined when admitted; otherwise the share it would exceed.
 */
export function admitTenantRequest(
  request: IncomingMessage,
  response: ServerResponse,
  tenantId: string,
): TenantLimit | undefined {
  const socket = request.socket as TrackedSocket | undefined;
  if (!socket) return undefined;
  const roster = socket[ROSTER];
  if (!roster) {
    socket[TRUSTED] = true;
    return undefined;
  }
  return roster.admitTenant(socket, response, tenantId);
}

/**
 * When full, a newcomer closes the oldest idle untrusted connection: a slow-header flood takes only its own places.
 * A tenant's requests hold at most its share of the connections and of the requests in flight, so a tenant that opens
 * thousands of slow requests takes its own share, not everybody's connections.
 */
export class ConnectionRoster {
  /** Connections not (yet) trusted, oldest first. */
  private readonly untrusted = new Set<TrackedSocket>();
  private open = 0;
  private readonly connectionsOf = new Map<string, number>();
  private readonly requestsOf = new Map<string, number>();

  constructor(
    private readonly maxConnections: number,
    private readonly shares: TenantShares = { connections: maxConnections, requests: Infinity },
  ) {}

  /** Connections and requests in flight of one tenant, in this process. */
  usage(tenantId: string): { connections: number; requests: number } {
    return { connections: this.connectionsOf.get(tenantId) ?? 0, requests: this.requestsOf.get(tenantId) ?? 0 };
  }

  admitTenant(
    socket: TrackedSocket,
    response: ServerResponse & { [COUNTED]?: boolean },
    tenantId: string,
  ): TenantLimit | undefined {
    if (response[COUNTED]) return undefined;
    const requests = this.requestsOf.get(tenantId) ?? 0;
    if (requests >= this.shares.requests) return 'requests';
    const onSocket = (socket[TENANTS] ??= new Map<string, number>());
    const here = onSocket.get(tenantId) ?? 0;
    if (here === 0 && (this.connectionsOf.get(tenantId) ?? 0) >= this.shares.connections) return 'connections';
    response[COUNTED] = true;
    socket[TRUSTED] = true;
    this.requestsOf.set(tenantId, requests + 1);
    onSocket.set(tenantId, here + 1);
    if (here === 0) this.connectionsOf.set(tenantId, (this.connectionsOf.get(tenantId) ?? 0) + 1);
    // 'close' comes once per response (see admit); once() would add two objects per request for as long as it runs.
    response.on('close', () => {
      decrement(this.requestsOf, tenantId);
      decrement(onSocket, tenantId);
      if (!onSocket.has(tenantId)) decrement(this.connectionsOf, tenantId);
    });
    return undefined;
  }

  admit(socket: TrackedSocket): void {
    socket[ROSTER] = this;
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
    response.on('close', () => {
      inFlight.delete(response);
      if (socket[TRUSTED]) this.untrusted.delete(socket);
    });
    return true;
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
