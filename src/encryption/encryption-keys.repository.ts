import { Injectable } from '@nestjs/common';
import { nothing, raw, shared, Sql, sql, Statement, statement } from '../database/statement';
import { UnitOfWork } from '../database/unit-of-work';
import { PayloadCipher } from './payload-cipher';

/** A broker's view of the stored key ids, for the start-up check. */
export interface KeysInUse {
  /** A queue with encryptionEnabled, if there is one. */
  encryptedQueue: string | undefined;
  keyIds: string[];
}

/** A table whose rows carry a sealed payload, with the key its rows are visited in (the partial key_id index). */
export interface SealedTable {
  name: 'messages' | 'dead_letters';
  key: string[];
  types: string[];
}

/** A sealed row as the re-encryption reads it: its key columns and its payload, as text. */
export type SealedRow = Record<string, string>;

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
    const { tenantId } = unit;
    const keyId = this.cipher.primaryKeyId;
    if (keyId === undefined || this.recorded.has(tenantId)) return;
    await unit.run(this.record(tenantId, keyId));
    // Only once it is committed: a rolled-back push recorded nothing.
    unit.afterCommit(() => this.recorded.add(tenantId));
  }

  /** Across tenants: one probe of a partial index and a read of the key table. */
  inUse(): Statement<KeysInUse> {
    return statement(
      sql`SELECT (SELECT q.name FROM queues q WHERE q.encryption_enabled LIMIT 1) AS queue,
              (SELECT array_agg(DISTINCT k.key_id ORDER BY k.key_id) FROM tenant_encryption_keys k) AS key_ids`,
      ([row]: Array<{ queue: string | null; key_ids: string[] | null }>) => ({
        encryptedQueue: row.queue ?? undefined,
        keyIds: row.key_ids ?? [],
      }),
    );
  }

  /** The tenants with payloads that may be sealed under one of `keyIds`. */
  tenantsUsing(keyIds: string[]): Statement<string[]> {
    return statement(
      sql`SELECT DISTINCT tenant_id FROM tenant_encryption_keys WHERE key_id = ANY(${keyIds}::text[]) ORDER BY tenant_id`,
      (rows: Array<{ tenant_id: string }>) => rows.map((row) => row.tenant_id),
    );
  }

  /** A key the tenant's payloads may be sealed under: a push's primary key, or the one a re-encryption moves them to. */
  record(tenantId: string, keyId: string): Statement<void> {
    return statement(
      sql`INSERT INTO tenant_encryption_keys (tenant_id, key_id) VALUES (${tenantId}, ${keyId}) ON CONFLICT (tenant_id, key_id) DO NOTHING`,
      nothing,
    );
  }

  /** Up to `batch` of the tenant's rows under `keyId`, past `after` in the table's key order, locked. */
  sealedBatch(
    tenantId: string,
    keyId: string,
    table: SealedTable,
    after: string[] | undefined,
    batch: number,
  ): Statement<SealedRow[]> {
    const key = raw(table.key.join(', '));
    const from = (after ?? table.key.map(() => null)).map((value) => shared(value));
    const past = commaSeparated(table.key.map((_column, index) => sql`${from[index]}::${raw(table.types[index])}`));
    return statement(
      sql`SELECT ${key}, payload::text AS payload FROM ${raw(table.name)}
        WHERE tenant_id = ${tenantId} AND key_id = ${keyId} AND (${from[0]}::text IS NULL OR (${key}) > (${past}))
        ORDER BY ${key}
        LIMIT ${raw(String(Math.trunc(batch)))}
          FOR UPDATE SKIP LOCKED`,
      (rows: SealedRow[]) => rows,
    );
  }

  /** The rows' payloads sealed again, under `keyId`. */
  reseal(tenantId: string, keyId: string | undefined, table: SealedTable, resealed: SealedRow[]): Statement<void> {
    const key = table.key.join(', ');
    const unnested = commaSeparated(
      [...table.key, 'payload'].map(
        (column, index) =>
          sql`${resealed.map((row) => row[column])}::${raw(index < table.types.length ? table.types[index] : 'text')}[]`,
      ),
    );
    return statement(
      sql`UPDATE ${raw(table.name)} r SET payload = t.payload::json, key_id = ${keyId}
           FROM unnest(${unnested}) AS t(${raw(key)}, payload)
          WHERE r.tenant_id = ${tenantId} AND ${raw(table.key.map((column) => `r.${column} = t.${column}`).join(' AND '))}`,
      nothing,
    );
  }

  /** The record goes only when no message or dead letter of the tenant is under the key any more. */
  retireIfUnused(tenantId: string, keyId: string): Statement<{ left: number; retired: boolean }> {
    const tenant = shared(tenantId);
    const key = shared(keyId);
    return statement(
      sql`WITH used AS (
         SELECT (SELECT count(*) FROM messages WHERE tenant_id = ${tenant} AND key_id = ${key})
              + (SELECT count(*) FROM dead_letters WHERE tenant_id = ${tenant} AND key_id = ${key}) AS remaining
       ), retired AS (
         DELETE FROM tenant_encryption_keys k USING used
          WHERE k.tenant_id = ${tenant} AND k.key_id = ${key} AND used.remaining = 0
         RETURNING 1
       )
       SELECT (SELECT remaining FROM used)::int AS remaining, (SELECT count(*) FROM retired)::int AS retired`,
      ([row]: Array<{ remaining: number; retired: number }>) => ({ left: row.remaining, retired: row.retired > 0 }),
    );
  }
}

/** Pieces written one after another, with a comma between each two. */
function commaSeparated(pieces: Sql[]): Sql {
  return new Sql(['', ...pieces.slice(1).map(() => ', '), ''], pieces);
}
