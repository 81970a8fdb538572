import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { UnitOfWork } from '../database/unit-of-work';
import { PayloadCipher } from './payload-cipher';

/** A broker's view of the stored key ids, for the start-up check. */
export interface KeysInUse {
  /** A queue with encryptionEnabled, if there is one. */
  encryptedQueue: string | undefined;
  keyIds: string[];
}

/**
 * `tenant_encryption_keys` records the key ids a tenant's stored payloads may be sealed under, so the start-up check
 * and the re-encryption read a small table rather than every message. A broker records its primary key for a tenant
 * before the first payload it seals there (once per process and tenant); the re-encryption removes an id once no row
 * of the tenant uses it.
 */
@Injectable()
export class EncryptionKeysRepository {
  private readonly recorded = new Set<string>();

  constructor(private readonly cipher: PayloadCipher) {}

  async recordPrimary(unit: UnitOfWork): Promise<void> {
    const { tenantId, manager } = unit;
    if (this.recorded.has(tenantId)) return;
    await manager.query(
      `INSERT INTO tenant_encryption_keys (tenant_id, key_id) VALUES ($1, $2)
       ON CONFLICT (tenant_id, key_id) DO NOTHING`,
      [tenantId, this.cipher.primaryKeyId],
    );
    // Only once it is committed: a rolled-back push recorded nothing.
    unit.afterCommit(() => this.recorded.add(tenantId));
  }

  /** Across tenants: one probe of a partial index and a read of the key table. */
  async inUse(manager: EntityManager): Promise<KeysInUse> {
    const [row]: Array<{ queue: string | null; key_ids: string[] | null }> = await manager.query(
      `SELECT (SELECT q.name FROM queues q WHERE q.encryption_enabled LIMIT 1) AS queue,
              (SELECT array_agg(DISTINCT k.key_id ORDER BY k.key_id) FROM tenant_encryption_keys k) AS key_ids`,
    );
    return { encryptedQueue: row.queue ?? undefined, keyIds: row.key_ids ?? [] };
  }

  /** The tenants with payloads that may be sealed under one of `keyIds`. */
  async tenantsUsing(keyIds: string[], manager: EntityManager): Promise<string[]> {
    const rows: Array<{ tenant_id: string }> = await manager.query(
      `SELECT DISTINCT tenant_id FROM tenant_encryption_keys WHERE key_id = ANY($1::text[]) ORDER BY tenant_id`,
      [keyIds],
    );
    return rows.map((row) => row.tenant_id);
  }
}
