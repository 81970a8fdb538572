import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';

/** Times are the database's, so the hosts' clocks need not agree. */
@Injectable()
export class BrokersRepository {
  /** Its own row is counted apart: the statement's snapshot does not see its own insert. */
  async beat(brokerId: string, liveForMs: number, forgetAfterMs: number, manager: EntityManager): Promise<number> {
    const [row]: Array<{ others: number }> = await manager.query(
      `WITH beat AS (
         INSERT INTO brokers (id, live_until) VALUES ($1, now() + $2 * interval '1 millisecond')
         ON CONFLICT (id) DO UPDATE SET seen_at = now(), live_until = excluded.live_until
       ), forgotten AS (
         DELETE FROM brokers WHERE id IN (
           SELECT id FROM brokers
            WHERE live_until < now() - $3 * interval '1 millisecond' AND id <> $1
              FOR UPDATE SKIP LOCKED)
       )
       SELECT count(*)::int AS others FROM brokers WHERE live_until > now() AND id <> $1`,
      [brokerId, liveForMs, forgetAfterMs],
    );
    return row.others + 1;
  }

  /** The others count it out at their next heartbeat instead of when its row goes stale. */
  async leave(brokerId: string, manager: EntityManager): Promise<void> {
    await manager.query('DELETE FROM brokers WHERE id = $1', [brokerId]);
  }
}
