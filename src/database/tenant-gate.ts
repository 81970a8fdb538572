import { PoolUnavailableError } from '../common/database-errors';

interface TenantShare {
  active: number;
  waiting: Array<{ grant: () => void }>;
}

/**
 * Caps how many pooled connections one tenant holds at once
 * (DB_TENANT_MAX_CONNECTIONS), so that a tenant flooding the broker queues
 * behind its own requests while another tenant's still find a connection.
 * A request past the cap waits its turn, within the acquire timeout, and is
 * then answered `pool` like any request that found no connection.
 */
export class TenantGate {
  private readonly shares = new Map<string, TenantShare>();

  constructor(private readonly maxPerTenant: number) {}

  /** Resolves with the release function once the tenant is under its cap. */
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
