import { Column } from 'typeorm';

/** What a minute of history counts, queue's or tenant's alike: embedded in both tables under its own column names. */
export class HistoryCounts {
  @Column({ name: 'pushed', type: 'bigint', default: 0 })
  pushed: string;

  @Column({ name: 'popped', type: 'bigint', default: 0 })
  popped: string;

  @Column({ name: 'acked', type: 'bigint', default: 0 })
  acked: string;

  @Column({ name: 'dead_lettered', type: 'bigint', default: 0 })
  deadLettered: string;

  /** The longest a message delivered in this minute had waited since its push. */
  @Column({ name: 'max_wait_ms', type: 'bigint', nullable: true })
  maxWaitMs: string | null;
}
