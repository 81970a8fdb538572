import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A broker process of the deployment; live while live_until is ahead of the database's clock. */
@Entity({ name: 'brokers' })
export class BrokerEntity {
  @PrimaryColumn({ name: 'id', type: 'uuid', primaryKeyConstraintName: 'pk_brokers' })
  id: string;

  @Column({ name: 'started_at', type: 'timestamptz', default: () => 'now()' })
  startedAt: Date;

  @Column({ name: 'seen_at', type: 'timestamptz', default: () => 'now()' })
  seenAt: Date;

  @Column({ name: 'live_until', type: 'timestamptz' })
  liveUntil: Date;
}
