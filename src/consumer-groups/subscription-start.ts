/**
 * Retention may have deleted the oldest messages. Push timestamps never decrease along a partition's offsets
 * (they are taken under the partition lock), so the last offset created before subscription_from is the boundary.
 */
export function subscriptionStartOffset(partition: string, group: string): string {
  return `GREATEST(
            COALESCE((SELECT min(m.seq) - 1 FROM messages m
                       WHERE m.tenant_id = ${partition}.tenant_id AND m.partition_id = ${partition}.id),
                     ${partition}.last_offset),
            CASE WHEN ${group}.subscription_from IS NULL THEN 0
                 ELSE COALESCE((SELECT max(m.seq) FROM messages m
                                 WHERE m.tenant_id = ${partition}.tenant_id AND m.partition_id = ${partition}.id
                                   AND m.created_at < ${group}.subscription_from), 0)
            END)`;
}
