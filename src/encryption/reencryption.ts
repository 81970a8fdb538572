import { Injectable, Logger } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { TransactionRunner } from '../database/transaction-runner';
import { EncryptionKeysRepository } from './encryption-keys.repository';
import { PayloadCipher, UnreadablePayloadError } from './payload-cipher';

export const REENCRYPT_BATCH = 500;

export interface ReencryptionReport {
  /** The key everything moved to. */
  keyId: string;
  messages: number;
  deadLetters: number;
  /** Rows left under an old key: they do not open (altered), or stayed locked through every pass. */
  left: number;
  /** Per tenant, the old key ids no row uses any more, removed from tenant_encryption_keys. */
  retired: Array<{ tenantId: string; keyId: string }>;
}

/** A table whose rows carry a sealed payload, with the key its rows are visited in (the partial key_id index). */
interface SealedTable {
  name: 'messages' | 'dead_letters';
  key: string[];
  types: string[];
}

const MESSAGES: SealedTable = { name: 'messages', key: ['partition_id', 'seq'], types: ['uuid', 'bigint'] };
const DEAD_LETTERS: SealedTable = { name: 'dead_letters', key: ['id'], types: ['uuid'] };

/**
 * Seals again, under the primary key, every payload sealed under another configured key, a bounded batch per
 * transaction in key order, so it runs beside brokers: each batch locks its rows (FOR UPDATE SKIP LOCKED: a row a
 * delete or dead-lettering holds is taken on the next pass), and a reader sees a row under its old key or its new
 * one, both configured. The ciphertext keeps the plaintext's length, so payload_bytes and the stored usage do not
 * change. `npm run reencrypt` runs it over every tenant (docs/operations.md).
 */
@Injectable()
export class Reencryption {
  private readonly logger = new Logger('Reencryption');

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly keys: EncryptionKeysRepository,
    private readonly cipher: PayloadCipher,
  ) {}

  async run(batch = REENCRYPT_BATCH): Promise<ReencryptionReport> {
    const primary = this.cipher.primaryKeyId;
    if (primary === undefined) throw new Error('no encryption key is configured: set ENCRYPTION_KEYS');
    const old = this.cipher.keyIds().filter((id) => id !== primary);
    const report: ReencryptionReport = { keyId: primary, messages: 0, deadLetters: 0, left: 0, retired: [] };
    if (old.length === 0) return report;
    const tenants = await this.transactions.run(undefined, (manager) => this.keys.tenantsUsing(old, manager));
    for (const tenantId of tenants) {
      await this.transactions.run(tenantId, (manager) =>
        manager.query(
          `INSERT INTO tenant_encryption_keys (tenant_id, key_id) VALUES ($1, $2) ON CONFLICT (tenant_id, key_id) DO NOTHING`,
          [tenantId, primary],
        ),
      );
      for (const keyId of old) {
        report.messages += await this.passes(tenantId, keyId, MESSAGES, batch);
        report.deadLetters += await this.passes(tenantId, keyId, DEAD_LETTERS, batch);
        const { left, retired } = await this.transactions.run(tenantId, (manager) =>
          this.retireIfUnused(tenantId, keyId, manager),
        );
        report.left += left;
        if (retired) report.retired.push({ tenantId, keyId });
      }
    }
    return report;
  }

  /** Passes over the table until one moves nothing more: what is left does not open or stays locked. */
  private async passes(tenantId: string, keyId: string, table: SealedTable, batch: number): Promise<number> {
    let total = 0;
    for (;;) {
      let moved = 0;
      let after: string[] | undefined;
      for (;;) {
        const step = await this.transactions.run(tenantId, (manager) =>
          this.step(tenantId, keyId, table, after, batch, manager),
        );
        moved += step.moved;
        if (step.last === undefined) break;
        after = step.last;
      }
      total += moved;
      if (moved === 0) return total;
      this.logger.log(`Tenant ${tenantId}: ${moved} rows of ${table.name} moved from key ${keyId}`);
    }
  }

  private async step(
    tenantId: string,
    keyId: string,
    table: SealedTable,
    after: string[] | undefined,
    batch: number,
    manager: EntityManager,
  ): Promise<{ moved: number; last: string[] | undefined }> {
    const key = table.key.join(', ');
    const past = table.key.map((column, index) => `$${index + 3}::${table.types[index]}`).join(', ');
    const rows: Array<Record<string, string>> = await manager.query(
      `SELECT ${key}, payload::text AS payload FROM ${table.name}
        WHERE tenant_id = $1 AND key_id = $2 AND ($3::text IS NULL OR (${key}) > (${past}))
        ORDER BY ${key}
        LIMIT ${Math.trunc(batch)}
          FOR UPDATE SKIP LOCKED`,
      [tenantId, keyId, ...(after ?? table.key.map(() => null))],
    );
    if (rows.length === 0) return { moved: 0, last: undefined };
    const resealed: Array<Record<string, string>> = [];
    for (const row of rows) {
      try {
        resealed.push({ ...row, payload: this.cipher.seal(this.cipher.open(keyId, row.payload)).json });
      } catch (error) {
        if (!(error instanceof UnreadablePayloadError)) throw error;
        this.logger.warn(`Tenant ${tenantId}: a row of ${table.name} under key ${keyId} is left: ${error.message}`);
      }
    }
    if (resealed.length > 0) {
      const unnested = [...table.key, 'payload']
        .map((column, index) => `$${index + 3}::${index < table.types.length ? table.types[index] : 'text'}[]`)
        .join(', ');
      await manager.query(
        `UPDATE ${table.name} r SET payload = t.payload::json, key_id = $2
           FROM unnest(${unnested}) AS t(${key}, payload)
          WHERE r.tenant_id = $1 AND ${table.key.map((column) => `r.${column} = t.${column}`).join(' AND ')}`,
        [
          tenantId,
          this.cipher.primaryKeyId,
          ...[...table.key, 'payload'].map((column) => resealed.map((row) => row[column])),
        ],
      );
    }
    const last = rows[rows.length - 1];
    return { moved: resealed.length, last: table.key.map((column) => String(last[column])) };
  }

  /** The record goes only when no message or dead letter of the tenant is under the key any more. */
  private async retireIfUnused(
    tenantId: string,
    keyId: string,
    manager: EntityManager,
  ): Promise<{ left: number; retired: boolean }> {
    const [row]: Array<{ remaining: number; retired: number }> = await manager.query(
      `WITH used AS (
         SELECT (SELECT count(*) FROM messages WHERE tenant_id = $1 AND key_id = $2)
              + (SELECT count(*) FROM dead_letters WHERE tenant_id = $1 AND key_id = $2) AS remaining
       ), retired AS (
         DELETE FROM tenant_encryption_keys k USING used
          WHERE k.tenant_id = $1 AND k.key_id = $2 AND used.remaining = 0
         RETURNING 1
       )
       SELECT (SELECT remaining FROM used)::int AS remaining, (SELECT count(*) FROM retired)::int AS retired`,
      [tenantId, keyId],
    );
    return { left: row.remaining, retired: row.retired > 0 };
  }
}
