import { Injectable, Logger } from '@nestjs/common';
import { StatementReader, TransactionRunner } from '../database/transaction-runner';
import { EncryptionKeysRepository, SealedRow, SealedTable } from './encryption-keys.repository';
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
    const tenants = await this.transactions.runOne(undefined, this.keys.tenantsUsing(old));
    for (const tenantId of tenants) {
      await this.transactions.runOne(tenantId, this.keys.record(tenantId, primary));
      for (const keyId of old) {
        report.messages += await this.passes(tenantId, keyId, MESSAGES, batch);
        report.deadLetters += await this.passes(tenantId, keyId, DEAD_LETTERS, batch);
        const { left, retired } = await this.transactions.runOne(tenantId, this.keys.retireIfUnused(tenantId, keyId));
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
        const step = await this.transactions.read(tenantId, (reader) =>
          this.step(reader, tenantId, keyId, table, after, batch),
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

  /** One batch, in the transaction that locked it. */
  private async step(
    reader: StatementReader,
    tenantId: string,
    keyId: string,
    table: SealedTable,
    after: string[] | undefined,
    batch: number,
  ): Promise<{ moved: number; last: string[] | undefined }> {
    const rows = await reader.run(this.keys.sealedBatch(tenantId, keyId, table, after, batch));
    if (rows.length === 0) return { moved: 0, last: undefined };
    const resealed: SealedRow[] = [];
    for (const row of rows) {
      try {
        resealed.push({ ...row, payload: this.cipher.seal(this.cipher.open(keyId, row.payload)).json });
      } catch (error) {
        if (!(error instanceof UnreadablePayloadError)) throw error;
        this.logger.warn(`Tenant ${tenantId}: a row of ${table.name} under key ${keyId} is left: ${error.message}`);
      }
    }
    if (resealed.length > 0) {
      await reader.run(this.keys.reseal(tenantId, this.cipher.primaryKeyId, table, resealed));
    }
    const last = rows[rows.length - 1];
    return { moved: resealed.length, last: table.key.map((column) => String(last[column])) };
  }
}
