import { PoolUnavailableError } from '../common/database-errors';

interface TenantShare {
  active: number;
  waiting: Array<{ grant: () => void }>;
}

/** A tenant flooding the broker queues behind its own requests while other tenants still find a connection. */
export class TenantGate {
  private readonly shares = new Map<string, TenantShare>();

  constructor(private maxPerTenant: number) {}

  /** Requests holding connections keep them; new ones meet the new share. */
  resize(maxPerTenant: number): void {
    this.maxPerTenant = maxPerTenant;
  }

  enter(tenantId: string, timeoutMs: number): Promise<() => void> {
    let share = this.shares.get(tenantId);
    if (!share) {
      share = { active: 0, waiting: [] };
      this.shares.set(tenantId, share);
    }
    const release = this.releaser(tenantId, share);
    if (share.active < this.maxPerTenant) {
      share.active += 1;
      return Promise.resolve(release);
    }
    const queue = share.waiting;
    return new Promise((resolve, reject) => {
      const entry = {
        grant: () => {
          clearTimeout(timer);
          resolve(release);
        },
      };
      const timer = setTimeout(() => {
        queue.splice(queue.indexOf(entry), 1);
        reject(new PoolUnavailableError(new Error(`tenant ${tenantId} holds its share of the pool`)));
      }, timeoutMs);
      queue.push(entry);
    });
  }

  private releaser(tenantId: string, share: TenantShare): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = share.waiting.shift();
      if (next) {
        next.grant();
        return;
      }
      share.active -= 1;
      if (share.active === 0) this.shares.delete(tenantId);
    };
  }
}
