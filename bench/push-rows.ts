import { Client, PoolClient } from 'pg';
import { uuidv7 } from '../src/common/uuid';

/*
 * A push's rows alone, in the transaction a push ran before it kept counters and usage: lock the partition, insert
 * the rows and move its last offset, commit. Light to load: the bare node:http floor (push-floor-app.ts) runs it, and
 * its memory is the floor's.
 */

const INSERT_SQL = `
  WITH stored AS (
    INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, trace_id, payload, payload_bytes, created_at)
    SELECT $1, $2, t.seq, t.id, t.transaction_id, NULL, t.payload::json, octet_length(t.payload), clock_timestamp()
      FROM unnest($3::bigint[], $4::uuid[], $5::text[], $6::text[]) AS t(seq, id, transaction_id, payload)
  )
  UPDATE partitions SET last_offset = $7, last_pushed_at = now() WHERE tenant_id = $1 AND id = $2`;

export interface PartitionRow {
  tenant_id: string;
  id: string;
}

/** A push's transaction without the broker: lock the partition, insert the rows and move its last offset, commit. */
export async function storeRows(
  client: Client | PoolClient,
  partition: PartitionRow,
  texts: string[],
): Promise<{ ids: string[]; transactionIds: string[] }> {
  const ids = texts.map(() => uuidv7());
  const transactionIds = texts.map(() => uuidv7());
  await client.query('BEGIN');
  try {
    const {
      rows: [locked],
    } = await client.query<{ last_offset: string }>(
      'SELECT last_offset FROM partitions WHERE tenant_id = $1 AND id = $2 FOR UPDATE',
      [partition.tenant_id, partition.id],
    );
    const first = Number(locked.last_offset) + 1;
    await client.query(INSERT_SQL, [
      partition.tenant_id,
      partition.id,
      texts.map((_text, index) => first + index),
      ids,
      transactionIds,
      texts,
      first + texts.length - 1,
    ]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
  return { ids, transactionIds };
}
