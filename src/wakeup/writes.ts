import { Injectable, Logger } from '@nestjs/common';
import { TransactionRunner } from '../database/transaction-runner';
import { UnitOfWork } from '../database/unit-of-work';
import { TenantQuotas } from '../limits/tenant-quotas';
import { ParkedPolls, redeliveriesOf, TenantCursorWork } from './parked-polls';
import { Notice, WakeupChannel } from './wakeup-channel';
import { notifyStatements } from './wakeup.repository';

/** Other processes hear of a write by NOTIFYs sent with its COMMIT; this one's parked polls are woken directly. */
@Injectable()
export class Writes {
  private readonly logger = new Logger('Writes');

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly polls: ParkedPolls,
    private readonly channel: WakeupChannel,
    private readonly quotas: TenantQuotas,
  ) {}

  async run<T>(tenantId: string, work: (unit: UnitOfWork) => Promise<T>): Promise<T> {
    let unit: UnitOfWork | undefined;
    let result: T;
    try {
      result = await this.transactions.run(
        tenantId,
        (session, transaction) => work((unit = new UnitOfWork(tenantId, session, transaction))),
        () => {
          const change = unit!.storedChange;
          const record = change && this.quotas.usageRecord(change, change.held);
          const last = unit!.lastStatement;
          const recording = typeof last === 'function';
          return {
            statement: recording ? last(record) : last,
            usage: record && !recording ? this.quotas.usageStatement(tenantId, record) : undefined,
            first: unit!.deferredStatements,
            checks: unit!.commitChecks,
            before: notifyStatements(
              this.channel.notices(tenantId, unit!.pushed, unit!.redelivered, unit!.deletedQueues),
            ),
          };
        },
      );
    } catch (error) {
      throw this.quotas.refusalOf(tenantId, error) ?? error;
    }
    const change = unit!.storedChange;
    if (change && (change.bytes < 0 || change.messages < 0)) this.quotas.forgetStored(tenantId);
    this.polls.pushed(tenantId, unit!.pushed);
    this.polls.redelivered(tenantId, unit!.redelivered);
    unit!.runEffects(this.logger);
    return result;
  }

  /**
   * Wakeups for what work on no tenant's behalf made claimable again (a background round): this process's polls at
   * once, the others' by NOTIFYs in one round trip, outside every tenant's share of the pool.
   */
  async redelivered(cursors: readonly TenantCursorWork[]): Promise<void> {
    if (cursors.length === 0) return;
    const byTenant = new Map<string, TenantCursorWork[]>();
    for (const cursor of cursors) {
      const ones = byTenant.get(cursor.tenantId) ?? [];
      ones.push(cursor);
      byTenant.set(cursor.tenantId, ones);
    }
    const notices: Notice[] = [];
    for (const [tenantId, ones] of byTenant) {
      const redeliveries = redeliveriesOf(ones);
      this.polls.redelivered(tenantId, redeliveries);
      notices.push(...this.channel.notices(tenantId, new Map(), redeliveries));
    }
    await this.transactions.run(
      undefined,
      () => Promise.resolve(),
      () => ({ before: notifyStatements(notices) }),
    );
  }
}
