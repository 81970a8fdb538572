import type { IncomingMessage } from 'node:http';

// Short: Node accepts one new connection per turn of the event loop.
const TURN_BUDGET_MS = 1;
const SLICE_MS = 0.5;
const KNOWN_CREDENTIALS = 10_000;
// A tenant minting a token per request forgets its own older ones, never another tenant's.
const KNOWN_CREDENTIALS_PER_TENANT = 64;

const ON_PROVED = Symbol('leasehold:on-credential-proved');
const ARRIVED = Symbol('leasehold:arrived');

interface Waiting {
  request: IncomingMessage;
  start: () => void;
}

type Provable = IncomingMessage & { [ON_PROVED]?: (tenantId: string) => void; [ARRIVED]?: number };

export function credentialProved(request: IncomingMessage, tenantId: string): void {
  (request as Provable)[ON_PROVED]?.(tenantId);
}

export function arrivalOf(request: IncomingMessage): number | undefined {
  return (request as Provable)[ARRIVED];
}

export const UNIDENTIFIED = 'unidentified';
export const ANONYMOUS = 'anonymous';

/**
 * Node runs requests in arrival order, so one tenant's thousand requests went ahead of another's one. A credential is
 * tied to a tenant only once it passed the guard (credentialProved), so a forged one cannot take a tenant's place.
 */
export class FairDispatch {
  private readonly queues = new Map<string, Waiting[]>();
  private readonly tenants = new Map<string, string>();
  private readonly credentials = new Map<string, string[]>();
  private queued = 0;
  private turnStarted: number | undefined;
  private draining = false;
  private deferredTotal = 0;

  constructor(private readonly tenantHeader: string | undefined) {}

  get waiting(): number {
    return this.queued;
  }

  get deferred(): number {
    return this.deferredTotal;
  }

  tenantOf(request: IncomingMessage): string {
    return this.tenantFor(this.credentialOf(request));
  }

  admit(request: IncomingMessage, start: () => void): void {
    const credential = this.credentialOf(request);
    const tenant = this.tenantFor(credential);
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

  private readonly drain = (): void => {
    const started = performance.now();
    try {
      do {
        const [tenant, queue] = this.queues.entries().next().value!;
        const { request, start } = queue.shift()!;
        this.queued -= 1;
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

  private tenantFor(credential: string | undefined): string {
    return credential === undefined ? ANONYMOUS : (this.tenants.get(credential) ?? UNIDENTIFIED);
  }

  private remember(credential: string, tenantId: string): void {
    if (this.tenants.has(credential)) return;
    const own = this.credentials.get(tenantId);
    if (own && own.length >= KNOWN_CREDENTIALS_PER_TENANT) this.forget(own[0]);
    else if (this.tenants.size >= KNOWN_CREDENTIALS) this.forget(this.tenants.keys().next().value!);
    this.tenants.set(credential, tenantId);
    const kept = this.credentials.get(tenantId);
    if (kept) kept.push(credential);
    else this.credentials.set(tenantId, [credential]);
  }

  private forget(credential: string): void {
    const tenantId = this.tenants.get(credential)!;
    this.tenants.delete(credential);
    const own = this.credentials.get(tenantId)!;
    own.splice(own.indexOf(credential), 1);
    if (own.length === 0) this.credentials.delete(tenantId);
  }

  private credentialOf(request: IncomingMessage): string | undefined {
    const authorization = request.headers.authorization;
    if (this.tenantHeader === undefined) return authorization;
    const header = request.headers[this.tenantHeader];
    if (authorization === undefined && header === undefined) return undefined;
    return `${authorization ?? ''}\n${typeof header === 'string' ? header : ''}`;
  }
}
