/**
 * A cursor's `ready` once it stands at `committed` (SQL over the cursor row `cursor`): false only when the partition's
 * row could be share-locked, so that no push holds it, and has no message past `committed`. A push in progress, or one
 * that committed after the statement's snapshot (the locking read sees its row), leaves the cursor ready; a push that
 * comes after waits for this transaction, then marks the cursor ready again. Only the claim index reads the flag, so a
 * cursor left ready with nothing to read costs a claim one look and is never wrong; one unmarked with work waiting
 * would not be claimed until the next push, which is why nothing else unmarks a cursor.
 */
export function readyAfter(cursor: string, committed: string): string {
  return `NOT EXISTS (SELECT 1 FROM partitions rp
                       WHERE rp.tenant_id = ${cursor}.tenant_id AND rp.id = ${cursor}.partition_id
                         AND rp.last_offset <= ${committed}
                         FOR SHARE OF rp SKIP LOCKED)`;
}

/**
 * SQL: the cursor `cursor` of the partition row `partition` has messages a claim could take now (no live lease): what
 * a write that held it wakes the group's polls for once it lets go, since a claim skipped it meanwhile.
 */
export function claimableNow(cursor: string, partition: string): string {
  return `${cursor}.ready AND ${partition}.last_offset > ${cursor}.committed_offset
          AND COALESCE(${cursor}.lease_expires_at <= clock_timestamp(), true)`;
}
