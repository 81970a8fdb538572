import type { IncomingMessage } from 'node:http';

/**
 * How long one turn of the event loop may spend starting requests before the
 * rest wait their tenant's turn, and how long one drain of the queues may
 * spend. Short, because Node accepts one new connection per turn.
 */
const TURN_BUDGET_MS = 1;
const SLICE_MS = 0.5;
/** Credentials remembered with their tenant; past this the oldest is forgotten. */
const KNOWN_CREDENTIALS = 10_000;

const ON_PROVED = Symbol('leasehold:on-credential-proved');

const ARRIVED = Symbol('leasehold:arrived');

interface Waiting {
  request: IncomingMessage;
  start: () => void;
}

type Provable = IncomingMessage & { [ON_PROVED]?: (tenantId: string) => void; [ARRIVED]?: number };

/** The request's credential was proved to be the tenant's: later requests with it wait in that tenant's queue. */
export function credentialProved(request: IncomingMessage, tenantId: string): void {
  (request as Provable)[ON_PROVED]?.(tenantId);
}

/** When a request that waited for its turn arrived (performance.now()); undefined for one started at once. */
export function arrivalOf(request: IncomingMessage): number | undefined {
  return (request as Provable)[ARRIVED];
}

/** Requests whose credential no earlier request proved: one share among all. */
export const UNIDENTIFIED = 'unidentified';
/** Requests without any credential (probes, public routes): one share among all. */
export const ANONYMOUS = 'anonymous';

/**
 * Starts requests in turn by tenant when the process has more to do than it
 * can. Node runs the requests that arrived since its last look in arrival
 * order, so one tenant's thousand requests went ahead of another's one. A
 * turn of the event loop starts requests as they come for TURN_BUDGET_MS;
 * past that they queue, one queue per tenant, and start one tenant after the
 * other, SLICE_MS at a time, with the loop's I/O between.
 *
 * A request's tenant is known before authentication when an earlier request
 * with the same credential (bearer token and tenant header) passed the guard
 * (credentialProved). Until then it waits in the shared UNIDENTIFIED queue; a
 * forged credential is never proved, so it cannot take a tenant's place.
 */
export class FairDispatch {
  private readonly queues = new Map<string, Waiting[]>();
  private readonly tenants = new Map<string, string>();
  private queued = 0;
  private turnStarted: number | undefined;
  private draining = false;
  private deferredTotal = 0;

  constructor(private readonly tenantHeader: string | undefined) {}

  /** Requests waiting for their tenant's turn now. */
  get waiting(): number {
    return this.queued;
  }

  /** Requests that have waited for their tenant's turn since start. */
  get deferred(): number {
    return this.deferredTotal;
  }

  /** The queue a request waits in: its credential's tenant, UNIDENTIFIED or ANONYMOUS. */
  tenantOf(request: IncomingMessage): string {
    const credential = this.credentialOf(request);
    return credential === undefined ? ANONYMOUS : (this.tenants.get(credential) ?? UNIDENTIFIED);
  }

  admit(request: IncomingMessage, start: () => void): void {
    const credential = this.credentialOf(request);
    const tenant = credential === undefined ? ANONYMOUS : (this.tenants.get(credential) ?? UNIDENTIFIED);
    if (tenant === UNIDENTIFIED) {
      (request as Provable)[ON_PROVED] = (tenantId) => this.remember(credential!, tenantId);
    }
    if (this.queued === 0 && this.withinTurn()) return start();
    (request as Provable)[ARRIVED] = performance.now();
    this.deferredTotal += 1;
    this.queued += 1;
    const waiting: Waiting = { request, start };
    const queue = this.queues.get(tenant);
    if (queue) queue.push(waiting);
    else this.queues.set(tenant, [waiting]);
    if (!this.draining) {
      this.draining = true;
      setImmediate(this.drain);
    }
  }

  private withinTurn(): boolean {
    const now = performance.now();
    if (this.turnStarted === undefined) {
      this.turnStarted = now;
      setImmediate(this.endTurn);
    }
    return now - this.turnStarted < TURN_BUDGET_MS;
  }

  private readonly endTurn = (): void => {
    this.turnStarted = undefined;
  };

  /** One request of each waiting tenant in turn until the slice is spent; the next slice after the loop's I/O. */
  private readonly drain = (): void => {
    const started = performance.now();
    try {
      do {
        const [tenant, queue] = this.queues.entries().next().value!;
        const { request, start } = queue.shift()!;
        this.queued -= 1;
        // Re-inserted at the end: the next start is another tenant's.
        this.queues.delete(tenant);
        if (queue.length > 0) this.queues.set(tenant, queue);
        // A caller that hung up while waiting is not served: nobody would hear the answer.
        if (!request.socket?.destroyed) start();
      } while (this.queued > 0 && performance.now() - started < SLICE_MS);
    } finally {
      if (this.queued > 0) setImmediate(this.drain);
      else this.draining = false;
    }
  };

  private remember(credential: string, tenantId: string): void {
    if (this.tenants.has(credential)) return;
    if (this.tenants.size >= KNOWN_CREDENTIALS) this.tenants.delete(this.tenants.keys().next().value!);
    this.tenants.set(credential, tenantId);
  }

  private credentialOf(request: IncomingMessage): string | undefined {
    const authorization = request.headers.authorization;
    const header = this.tenantHeader === undefined ? undefined : request.headers[this.tenantHeader];
    if (authorization === undefined && header === undefined) return undefined;
    return `${authorization ?? ''}\n${typeof header === 'string' ? header : ''}`;
  }
}
