import { Injectable } from '@nestjs/common';
import { nothing, shared, sql, Statement, statement } from '../database/statement';

/** Times are the database's, so the hosts' clocks need not agree. */
@Injectable()
export class BrokersRepository {
  /** Its own row is counted apart: the statement's snapshot does not see its own insert. */
  beat(brokerId: string, liveForMs: number, forgetAfterMs: number): Statement<number> {
    const id = shared(brokerId);
    return statement(
      sql`WITH beat AS (
         INSERT INTO brokers (id, live_until) VALUES (${id}, now() + ${liveForMs} * interval '1 millisecond')
         ON CONFLICT (id) DO UPDATE SET seen_at = now(), live_until = excluded.live_until
       ), forgotten AS (
         DELETE FROM brokers WHERE id IN (
           SELECT id FROM brokers
            WHERE live_until < now() - ${forgetAfterMs} * interval '1 millisecond' AND id <> ${id}
              FOR UPDATE SKIP LOCKED)
       )
       SELECT count(*)::int AS others FROM brokers WHERE live_until > now() AND id <> ${id}`,
      ([row]: Array<{ others: number }>) => row.others + 1,
    );
  }

  /** The others count it out at their next heartbeat instead of when its row goes stale. */
  leave(brokerId: string): Statement<void> {
    return statement(sql`DELETE FROM brokers WHERE id = ${brokerId}`, nothing);
  }
}
