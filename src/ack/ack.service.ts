import { Injectable } from '@nestjs/common';
import { compositeKey } from '../common/composite-key';
import { HistoryRecorder } from '../history/history-recorder';
import { MetricsService, RedeliveryCause } from '../metrics/metrics.service';
import { Redelivery, redeliveriesOf } from '../wakeup/parked-polls';
import { UnitOfWork } from '../database/unit-of-work';
import { Sql } from '../database/statement';
import { WakeupChannel } from '../wakeup/wakeup-channel';
import { Writes } from '../wakeup/writes';
import { AckCommand } from './dto/ack-request.dto';
import { AckResultDto } from './dto/ack-result.dto';
import { AckRepository, Cursor, CursorUpdate, DeadLetter, HeldCursor } from './ack.repository';
import { HandedOutLeases } from './handed-out-leases';

export const INVALID_LEASE = 'invalid or expired lease';
export const ALREADY_ACKNOWLEDGED = 'message already acknowledged';

/** Acks of messages passed before the transaction began are refused, so a replayed transaction is not half applied. */
export class TransactionAcks {
  /** Per cursor, its committed offset when the transaction first locked it. */
  readonly committedAtStart = new Map<string, number>();

  /**
   * @param pushedBefore Positions of the acks that name a message an earlier push of the transaction stores: the
   *   transaction writes its messages after its acks, so the database cannot show them to the ack.
   * @param saveWithNext The cursors' update goes with the transaction's next round trip (UnitOfWork.withNext) rather
   *   than in one of its own.
   */
  constructor(
    readonly requiredLeases: ReadonlySet<string>,
    readonly pushedBefore: ReadonlySet<number> = new Set(),
    readonly saveWithNext = false,
  ) {}
}

/** The offset of a message stored by the transaction acking it: past every offset delivered, so never deliverable. */
const PUSHED_BY_THIS_TRANSACTION = Number.POSITIVE_INFINITY;

interface WorkingCursor extends Cursor {
  changed: boolean;
  releaseLease: boolean;
  /** A request's failures on one partition count as one retry: they are one nacked batch. */
  failureCounted: boolean;
  /** Where it stood when locked: the group's lag counter moves by the difference. */
  committedBefore: number;
  retryAfterMs: number;
}

@Injectable()
export class AckService {
  constructor(
    private readonly writes: Writes,
    private readonly acks: AckRepository,
    private readonly metrics: MetricsService,
    private readonly history: HistoryRecorder,
    private readonly handedOut: HandedOutLeases,
    private readonly channel: WakeupChannel,
  ) {}

  async acknowledge(tenantId: string, commands: AckCommand[]): Promise<AckResultDto[]> {
    if (commands.length === 0) return [];
    const handedOut = this.decideOnClaim(tenantId, commands);
    if (handedOut) {
      const results = await this.writes.run(tenantId, (unit) => this.saveDecided(unit, commands, handedOut));
      this.metrics.ackPaths.inc({ path: results ? 'claim' : 'moved' });
      if (results) return results;
    } else {
      this.metrics.ackPaths.inc({ path: 'lock' });
    }
    return this.writes.run(tenantId, (unit) => this.apply(unit, commands));
  }

  /**
   * The acks of one batch this process handed out, all completed, decided on its cursor as the claim left it: what
   * apply() would decide if the cursor is still so, which the statement saving it checks. Undefined when they are not
   * such acks or not all accepted; apply() then decides on the locked cursor.
   */
  private decideOnClaim(tenantId: string, commands: AckCommand[]): DecidedOnClaim | undefined {
    const leaseId = commands[0].leaseId;
    const lease = leaseId === undefined ? undefined : this.handedOut.take(tenantId, leaseId);
    if (!lease) return undefined;
    const offsets = new Map<string, number>();
    lease.transactionIds.forEach((transactionId, index) => offsets.set(transactionId, lease.seqs[index]));
    const acked = new Map<string, number>();
    for (const command of commands) {
      const seq = offsets.get(command.transactionId);
      if (
        command.outcome !== 'completed' ||
        command.leaseId !== leaseId ||
        command.partitionId !== lease.partitionId ||
        command.consumerGroup !== lease.consumerGroup ||
        seq === undefined
      ) {
        return undefined;
      }
      acked.set(command.transactionId, seq);
    }
    // What a completed ack reads of its cursor; the rest (retries, dead letters, the queue's settings) it does not.
    const cursor = working({
      partitionId: lease.partitionId,
      consumerGroup: lease.consumerGroup,
      queue: lease.queue,
      partition: lease.partition,
      lastOffset: lease.leaseEndOffset,
      retryLimit: 0,
      deadLetterQueue: false,
      retryDelayMs: 0,
      committedOffset: lease.committedOffset,
      nextOffset: null,
      deliveredOffset: lease.leaseEndOffset,
      leaseEndOffset: lease.leaseEndOffset,
      leaseId: lease.leaseId,
      leaseLive: true,
      leaseEpoch: lease.leaseEpoch,
      retryCount: 0,
    });
    const tally: Tally = { handedBack: [], deadLettered: [], completed: new Map() };
    const letters: DeadLetter[] = [];
    const cursors = new Map([[compositeKey(cursor.partitionId, cursor.consumerGroup), cursor]]);
    const results = this.decideEach(
      commands,
      cursors,
      (command) => acked.get(command.transactionId),
      new Set(),
      letters,
      tally,
    );
    if (letters.length > 0 || !cursor.changed || results.some((result) => !result.success)) return undefined;
    const held: HeldCursor = {
      leaseId: lease.leaseId,
      leaseEpoch: lease.leaseEpoch,
      committedOffset: lease.committedOffset,
      leaseEndOffset: lease.leaseEndOffset,
      acked,
    };
    return { cursor, held, results, tally };
  }

  /** One round trip: the cursor's update, sent with BEGIN and COMMIT. Undefined when the cursor had moved on. */
  private async saveDecided(
    unit: UnitOfWork,
    commands: AckCommand[],
    { cursor, held, results, tally }: DecidedOnClaim,
  ): Promise<AckResultDto[] | undefined> {
    const notify = (messages: Sql) =>
      this.channel.redeliveryNotify(unit.tenantId, cursor.queue, cursor.consumerGroup, cursor.partition, messages);
    const saved = await unit.commitWith(this.acks.saveHandedOut(unit.tenantId, cursor, held, notify));
    if (!saved) return undefined;
    cursor.lastOffset = saved.lastOffset;
    // This process's polls; the others heard of it by the statement's own notice.
    for (const redelivery of claimableAgain([cursor])) unit.redeliver(redelivery);
    unit.afterCommit(() => this.count(unit.tenantId, commands, results, tally));
    return results;
  }

  private count(tenantId: string, commands: AckCommand[], results: AckResultDto[], tally: Tally): void {
    results.forEach((result, index) =>
      this.metrics.acks.inc({ status: commands[index].outcome, outcome: result.success ? 'accepted' : 'refused' }),
    );
    for (const { queue, cause, messages } of tally.handedBack) {
      this.metrics.redeliveredMessages.inc({ ...this.metrics.queue(tenantId, queue), cause }, messages);
    }
    for (const queue of tally.deadLettered) {
      this.metrics.deadLettered.inc(this.metrics.queue(tenantId, queue));
      this.history.deadLettered(tenantId, queue, 1);
    }
    for (const [queue, messages] of tally.completed) this.history.acked(tenantId, queue, messages);
  }

  /** Shared with transactions: wakeups and counts happen only once the unit of work has committed. */
  async apply(unit: UnitOfWork, commands: AckCommand[], transaction?: TransactionAcks): Promise<AckResultDto[]> {
    const { tenantId } = unit;
    const tally: Tally = { handedBack: [], deadLettered: [], completed: new Map() };
    const keys = uniqueBy(commands, (command) => compositeKey(command.partitionId, command.consumerGroup));
    const [lockedCursors, offsets] = await unit.runTogether([
      this.acks.lockCursors(tenantId, keys),
      this.acks.offsets(tenantId, commands),
    ] as const);
    const cursors = new Map<string, WorkingCursor>(
      lockedCursors.map((cursor) => [compositeKey(cursor.partitionId, cursor.consumerGroup), working(cursor)]),
    );
    for (const command of commands) if (command.leaseId !== undefined) this.handedOut.forget(tenantId, command.leaseId);
    for (const leaseId of transaction?.requiredLeases ?? []) this.handedOut.forget(tenantId, leaseId);
    for (const [key, cursor] of cursors) {
      if (transaction && !transaction.committedAtStart.has(key)) {
        transaction.committedAtStart.set(key, cursor.committedOffset);
      }
    }
    const missing = keys.filter((key) => !cursors.has(compositeKey(key.partitionId, key.consumerGroup)));
    const partitions =
      missing.length > 0
        ? await unit.run(this.acks.existingPartitions(tenantId, [...new Set(missing.map((key) => key.partitionId))]))
        : new Set<string>();

    const letters: DeadLetter[] = [];
    const seqOf = (command: AckCommand, index: number) =>
      transaction?.pushedBefore.has(index)
        ? PUSHED_BY_THIS_TRANSACTION
        : offsets.get(compositeKey(command.partitionId, command.transactionId));
    const results = this.decideEach(commands, cursors, seqOf, partitions, letters, tally, transaction);

    // Never refused by a storage quota: a consumer's failure has to go somewhere.
    if (letters.length > 0) unit.stores(await unit.run(this.acks.deadLetter(tenantId, letters)));
    const updates: CursorUpdate[] = [...cursors.values()].filter((cursor) => cursor.changed);
    if (updates.length > 0) {
      // A transaction may write more after its acks; an ack's own unit ends here, so its update goes with the COMMIT.
      const save = this.acks.saveCursors(tenantId, updates);
      if (transaction?.saveWithNext) unit.withNext(save);
      else if (transaction) await unit.run(save);
      else unit.lastly(save);
    }
    for (const redelivery of claimableAgain([...cursors.values()])) unit.redeliver(redelivery);
    unit.afterCommit(() => this.count(tenantId, commands, results, tally));
    return results;
  }

  /** Each command's result, in order; `seqOf` is its message's offset (undefined: not found in its partition). */
  private decideEach(
    commands: AckCommand[],
    cursors: Map<string, WorkingCursor>,
    seqOf: (command: AckCommand, index: number) => number | undefined,
    partitions: Set<string>,
    letters: DeadLetter[],
    tally: Tally,
    transaction?: TransactionAcks,
  ): AckResultDto[] {
    return commands.map((command, index) => {
      const key = compositeKey(command.partitionId, command.consumerGroup);
      const cursor = cursors.get(key);
      const seq = seqOf(command, index);
      const outcome =
        transaction && cursor && seq !== undefined && seq <= transaction.committedAtStart.get(key)!
          ? { success: false, error: ALREADY_ACKNOWLEDGED, leaseReleased: false, dlq: false }
          : this.decide(
              withLease(command, cursor, transaction),
              cursor,
              partitions.has(command.partitionId),
              seq,
              letters,
              tally,
            );
      // A literal, not a spread: one result per acked message, and a spread costs microseconds on Node 20.
      return {
        index,
        transactionId: command.transactionId,
        success: outcome.success,
        error: outcome.error,
        leaseReleased: outcome.leaseReleased,
        dlq: outcome.dlq,
      };
    });
  }

  private decide(
    command: AckCommand,
    cursor: WorkingCursor | undefined,
    partitionExists: boolean,
    seq: number | undefined,
    letters: DeadLetter[],
    tally: Tally,
  ): Omit<AckResultDto, 'index' | 'transactionId'> {
    const refused = (error: string) => ({ success: false, error, leaseReleased: false, dlq: false });
    const done = (leaseReleased: boolean, dlq = false) => ({ success: true, error: null, leaseReleased, dlq });

    if (!cursor && !partitionExists) return refused('partition not found');
    if (seq === undefined) return refused('message not found in this partition');
    // A later claim of the partition fences out every ack carrying an earlier one.
    if (command.leaseEpoch !== undefined && cursor?.leaseEpoch !== command.leaseEpoch) return refused(INVALID_LEASE);
    if (command.leaseId !== undefined) {
      if (!cursor?.leaseLive || cursor.leaseId !== command.leaseId) return refused(INVALID_LEASE);
      if (seq > cursor.leaseEndOffset!) return refused('message is not in the batch of this lease');
    } else if (!cursor || seq > cursor.deliveredOffset) {
      return refused('message has not been delivered to this consumer group');
    }

    if (command.outcome === 'completed') {
      if (seq > cursor.committedOffset) {
        cursor.committedOffset = seq;
        cursor.retryCount = 0;
        cursor.changed = true;
      }
      tally.completed.set(cursor.queue, (tally.completed.get(cursor.queue) ?? 0) + 1);
      const spanDone = cursor.leaseEndOffset !== null && cursor.committedOffset >= cursor.leaseEndOffset;
      const endLease = spanDone || (command.releaseLease === true && command.leaseId !== undefined);
      return done(endLease && this.release(cursor));
    }

    if (seq <= cursor.committedOffset) return refused(ALREADY_ACKNOWLEDGED);
    // Any failure hands the whole batch back at once.
    const batchEnd = cursor.leaseEndOffset ?? cursor.deliveredOffset;
    const leaseReleased = this.release(cursor);
    const handBack = (): void => {
      const messages = batchEnd - cursor.committedOffset;
      const cause: RedeliveryCause = command.outcome === 'retry' ? 'retry' : 'nack';
      if (leaseReleased && messages > 0) tally.handedBack.push({ queue: cursor.queue, cause, messages });
    };
    // What a failure hands back waits out the queue's retryDelay; what a dead letter leaves behind does not.
    const delayRetry = (): void => {
      if (cursor.retryDelayMs > 0 && batchEnd > cursor.committedOffset) {
        cursor.retryAfterMs = cursor.retryDelayMs;
        cursor.changed = true;
      }
    };
    if (command.outcome === 'retry') {
      delayRetry();
      handBack();
      return done(leaseReleased);
    }

    // Only the next message in order can leave the partition: moving the cursor past a later one would skip the
    // unacknowledged ones before it. After a range retention deleted, the next is the first one kept.
    const atCursor = seq === cursor.committedOffset + 1 || (seq === cursor.nextOffset && cursor.committedOffset < seq);
    if (atCursor && (command.outcome === 'dlq' || cursor.retryCount >= cursor.retryLimit)) {
      const keep = command.outcome === 'dlq' || cursor.deadLetterQueue;
      if (keep) {
        tally.deadLettered.push(cursor.queue);
        letters.push({
          partitionId: cursor.partitionId,
          consumerGroup: cursor.consumerGroup,
          seq,
          errorMessage: command.error,
          retryCount: cursor.retryCount,
        });
      }
      cursor.committedOffset = seq;
      cursor.retryCount = 0;
      cursor.changed = true;
      handBack();
      return done(leaseReleased, keep);
    }
    if (!cursor.failureCounted) {
      cursor.retryCount += 1;
      cursor.failureCounted = true;
      cursor.changed = true;
    }
    delayRetry();
    handBack();
    return done(leaseReleased);
  }

  /** Clears the row's lease (live or expired); reports whether a live one ended. */
  private release(cursor: WorkingCursor): boolean {
    const wasLive = cursor.leaseLive;
    if (cursor.leaseId !== null) {
      cursor.leaseId = null;
      cursor.leaseEndOffset = null;
      cursor.leaseLive = false;
      cursor.releaseLease = true;
      cursor.changed = true;
    }
    return wasLive;
  }
}

interface Tally {
  handedBack: Array<{ queue: string; cause: RedeliveryCause; messages: number }>;
  deadLettered: string[];
  /** Completed acks accepted, per queue. */
  completed: Map<string, number>;
}

/** The acks of a handed-out batch decided on its claim: the cursor's update, what it holds the cursor to, the answers. */
interface DecidedOnClaim {
  cursor: WorkingCursor;
  held: HeldCursor;
  results: AckResultDto[];
  tally: Tally;
}

function working(cursor: Cursor): WorkingCursor {
  return Object.assign(cursor, {
    changed: false,
    releaseLease: false,
    failureCounted: false,
    committedBefore: cursor.committedOffset,
    retryAfterMs: 0,
  });
}

function claimableAgain(cursors: WorkingCursor[]): Redelivery[] {
  return redeliveriesOf(
    cursors
      .filter((cursor) => cursor.releaseLease && cursor.lastOffset > cursor.committedOffset)
      .map(({ queue, consumerGroup, partition, lastOffset, committedOffset }) => ({
        queue,
        consumerGroup,
        partition,
        messages: lastOffset - committedOffset,
      })),
  );
}

/** A transaction's ack without a leaseId of its own is checked against the required lease holding its cursor. */
function withLease(
  command: AckCommand,
  cursor: Cursor | undefined,
  transaction: TransactionAcks | undefined,
): AckCommand {
  if (command.leaseId !== undefined || !transaction || !cursor?.leaseId) return command;
  return transaction.requiredLeases.has(cursor.leaseId) ? { ...command, leaseId: cursor.leaseId } : command;
}

function uniqueBy<T>(items: T[], key: (item: T) => string): T[] {
  return [...new Map(items.map((item) => [key(item), item])).values()];
}
