import { ConflictException, Injectable, InternalServerErrorException } from '@nestjs/common';
import { MaintenanceService } from '../maintenance/maintenance.service';
import { compositeKey } from '../common/composite-key';
import { EncryptionKeysRepository } from '../encryption/encryption-keys.repository';
import { PayloadCipher } from '../encryption/payload-cipher';
import { uuidv7 } from '../common/uuid';
import { TenantQuotas } from '../limits/tenant-quotas';
import { HistoryRecorder } from '../history/history-recorder';
import { MetricsService } from '../metrics/metrics.service';
import { UnitOfWork } from '../database/unit-of-work';
import { Writes } from '../wakeup/writes';
import { PushItem } from './dto/push-request.dto';
import { PushResultDto, PushStatus } from './dto/push-result.dto';
import { LockedPartition, NamedLocks, NewMessage, PushRepository, QueueLocks } from './push.repository';
import { NamedTransactionKey } from '../message/message-shape';

export const QUEUE_FULL = 'queue is full';
/** Rounds of insert-then-lock a push makes for queues deleted under it. */
const QUEUE_CREATE_ROUNDS = 3;

@Injectable()
export class PushService {
  constructor(
    private readonly writes: Writes,
    private readonly pushes: PushRepository,
    private readonly metrics: MetricsService,
    private readonly quotas: TenantQuotas,
    private readonly maintenance: MaintenanceService,
    private readonly cipher: PayloadCipher,
    private readonly keys: EncryptionKeysRepository,
    private readonly history: HistoryRecorder,
  ) {}

  /** Offsets are assigned under each partition's row lock, so a cursor can never pass an uncommitted lower offset. */
  async push(tenantId: string, producerSub: string | undefined, items: PushItem[]): Promise<PushResultDto[]> {
    this.maintenance.assertPushesAllowed(tenantId);
    if (items.length === 0) return [];
    return this.writes.run(tenantId, (unit) => this.store(unit, producerSub ?? null, items, 'with-commit'));
  }

  /** 'with-commit': its rows go out with the COMMIT, in one round trip; nothing the unit does after it may need them. */
  async store(
    unit: UnitOfWork,
    producerSub: string | null,
    items: PushItem[],
    write: 'now' | 'with-commit' = 'now',
  ): Promise<PushResultDto[]> {
    return this.write(unit, producerSub, await this.prepare(unit, items), write);
  }

  /**
   * The reads of a push: its partitions locked (created if missing) and the transactionIds already stored found.
   * Nothing is written yet, so a transaction can apply its acks before its pushes take room in a queue.
   */
  async prepare(unit: UnitOfWork, items: PushItem[], lockedBefore?: PushLocks): Promise<PreparedPush> {
    const { tenantId } = unit;
    const named = partitionsByQueue(items);
    const chosen = chosenKeys(items);
    const { locks, existing } = lockedBefore ?? (await this.lockNamed(unit, named, chosen));
    const { ids, maxSizes, encrypted, locked, createdPartitions } = locks
      ? { ...locks, createdPartitions: new Map<string, number>() }
      : await this.createAndLock(unit, named);
    const queueNames = new Map([...ids].map(([name, id]) => [id, name]));
    for (const partition of locked) {
      named.get(queueNames.get(partition.queueId)!)!.set(partition.name, {
        partition,
        lastOffset: partition.lastOffset,
        stored: 0,
      });
    }
    const slots = items.map((item) => named.get(item.queue)!.get(item.partition) ?? throwQueueDeleted());
    const stored =
      chosen.length === 0
        ? new Map<string, string>()
        : (existing ??
          (await unit.run(
            this.pushes.findExisting(
              tenantId,
              chosen.map(({ queue, partition, transactionId }) => ({
                partitionId: named.get(queue)!.get(partition)!.partition.id,
                transactionId,
              })),
            ),
          )));
    return {
      items,
      partitionIds: slots.map((slot) => slot.partition.id),
      transactionIds: items.map((item) => item.transactionId ?? uuidv7()),
      stored,
      named,
      slots,
      maxSizes,
      encrypted,
      createdPartitions,
    };
  }

  /** The rest of the push, under the locks prepare() took; 'with-commit' as for store(). */
  async write(
    unit: UnitOfWork,
    producerSub: string | null,
    prepared: PreparedPush,
    write: 'now' | 'with-commit' = 'now',
  ): Promise<PushResultDto[]> {
    const { tenantId } = unit;
    const { items, named, slots, transactionIds, maxSizes, encrypted, createdPartitions } = prepared;
    const known = prepared.stored;
    // A push to plain queues only ever looks at this: no per-message work, no statement more.
    const sealing = encrypted.size > 0;
    if (sealing && !this.cipher.enabled) {
      const { queue } = items[slots.findIndex((slot) => encrypted.has(slot.partition.queueId))];
      throw new InternalServerErrorException({
        error: `queue "${queue}" has encryptionEnabled and this broker has no encryption key (ENCRYPTION_KEYS)`,
      });
    }
    let sealed = false;

    // Room left in queues with a maxSize; past it an item fails rather than being stored.
    const room = maxSizes.size === 0 ? new Map<string, number>() : await this.roomLeft(unit, maxSizes);

    const fresh: NewMessage[] = [];
    let freshBytes = 0;
    const results = new Array<PushResultDto>(items.length);
    for (let index = 0; index < items.length; index += 1) {
      const item = items[index];
      const slot = slots[index];
      const transactionId = transactionIds[index];
      const key = item.transactionId === undefined ? undefined : compositeKey(slot.partition.id, transactionId);
      const original = key === undefined ? undefined : known.get(key);
      if (original) {
        results[index] = pushResult(index, original, transactionId, item.queue, 'duplicate');
        continue;
      }
      const left = room.get(slot.partition.queueId);
      if (left !== undefined) {
        if (left <= 0) {
          results[index] = pushResult(index, null, transactionId, item.queue, 'failed');
          continue;
        }
        room.set(slot.partition.queueId, left - 1);
      }
      const id = uuidv7();
      slot.lastOffset += 1;
      slot.stored += 1;
      if (key !== undefined) known.set(key, id);
      let payloadJson = item.payloadJson;
      let keyId: string | null = null;
      if (sealing && encrypted.has(slot.partition.queueId)) {
        ({ json: payloadJson, keyId } = this.cipher.seal(payloadJson));
        sealed = true;
      }
      // What is stored counts against the quotas; MESSAGE_MAX_BYTES held the payload as sent.
      const payloadBytes = Buffer.byteLength(payloadJson);
      freshBytes += payloadBytes;
      fresh.push({
        partitionId: slot.partition.id,
        seq: slot.lastOffset,
        id,
        transactionId,
        traceId: item.traceId ?? null,
        payloadJson,
        payloadBytes,
        keyId,
      });
      results[index] = pushResult(index, id, transactionId, item.queue, 'queued');
    }

    if (fresh.length > 0) {
      const adding = { bytes: freshBytes, messages: fresh.length };
      this.quotas.assertRoomToStore(tenantId, adding);
      unit.stores(adding, true);
      const lastOffsets = new Map<string, number>();
      const perQueue = new Map<string, number>();
      for (const [queue, partitions] of named) {
        for (const [name, slot] of partitions) {
          if (!slot || slot.stored === 0) continue;
          lastOffsets.set(slot.partition.id, slot.lastOffset);
          unit.push(queue, name, slot.stored);
          perQueue.set(queue, (perQueue.get(queue) ?? 0) + slot.stored);
        }
      }
      if (sealed) await this.keys.recordPrimary(unit);
      if (write === 'with-commit') {
        unit.lastly((usage) =>
          this.pushes.store(tenantId, producerSub, fresh, lastOffsets, usage, sealed, createdPartitions),
        );
      } else {
        await unit.run(
          this.pushes.store(tenantId, producerSub, fresh, lastOffsets, undefined, sealed, createdPartitions),
        );
      }
      unit.afterCommit(() => {
        for (const [queue, count] of perQueue) {
          this.metrics.pushedMessages.inc(this.metrics.queue(tenantId, queue), count);
          this.history.pushed(tenantId, queue, count);
        }
      });
    }
    if (fresh.length === 0 && createdPartitions.size > 0) {
      await unit.run(this.pushes.countPartitions(tenantId, createdPartitions));
    }
    return results;
  }

  /**
   * The duplicate check names its partitions, so it can share the lock's round trip; it holds if all exist. 'now' in a
   * round trip of their own; 'after-next' behind the statements of the unit's next round trip (UnitOfWork.readAfterNext),
   * as a transaction's pushes ride with its acks' reads.
   */
  private lockNamed(
    unit: UnitOfWork,
    named: Map<string, Map<string, Slot | undefined>>,
    chosen: NamedTransactionKey[],
    when: 'now' | 'after-next' = 'now',
  ): Promise<PushLocks> {
    const lock = this.pushes.lockNamed(unit.tenantId, named);
    const check = chosen.length === 0 ? undefined : this.pushes.findExistingByName(unit.tenantId, chosen);
    const sent: Promise<[NamedLocks | undefined, Map<string, string> | undefined]> =
      when === 'after-next'
        ? Promise.all([unit.readAfterNext(lock), check && unit.readAfterNext(check)])
        : check
          ? unit.runTogether([lock, check] as const)
          : unit.run(lock).then((locks) => [locks, undefined]);
    const answer = sent.then(([locks, existing]) => (locks ? { locks, existing } : {}));
    // A unit that fails before that round trip throws there: an answer sent after-next then has no reader.
    answer.catch(() => undefined);
    return answer;
  }

  /** prepare()'s lock and duplicate check, sent 'after-next' (see lockNamed); its answer goes to prepare(). */
  lockAfterNext(unit: UnitOfWork, items: PushItem[]): Promise<PushLocks> {
    return this.lockNamed(unit, partitionsByQueue(items), chosenKeys(items), 'after-next');
  }

  private async createAndLock(
    unit: UnitOfWork,
    named: Map<string, Map<string, Slot | undefined>>,
  ): Promise<QueueLocks & { locked: LockedPartition[]; createdPartitions: Map<string, number> }> {
    const { tenantId } = unit;
    const queues = await this.ensureQueues(unit, [...named.keys()]);
    await this.quotas.admit(tenantId, 'queues', queues.created, unit);
    const wanted: Array<{ queueId: string; name: string }> = [];
    for (const [queue, partitions] of named) {
      const queueId = queues.ids.get(queue);
      if (!queueId) throw queueDeleted();
      for (const name of partitions.keys()) wanted.push({ queueId, name });
    }
    const { locked, created } = await this.ensurePartitions(unit, wanted);
    await this.quotas.admit(
      tenantId,
      'partitions',
      [...created.values()].reduce((sum, n) => sum + n, 0),
      unit,
    );
    return {
      ids: queues.ids,
      maxSizes: queues.maxSizes,
      encrypted: queues.encrypted,
      locked,
      createdPartitions: created,
    };
  }

  /** Nearly every push names queues that exist: one statement, no insert attempted. */
  private async ensureQueues(unit: UnitOfWork, names: string[]): Promise<QueueLocks & { created: number }> {
    const existing = await unit.run(this.pushes.lockQueues(unit.tenantId, names));
    if (existing.ids.size === names.length) return { ...existing, created: 0 };
    let created = 0;
    for (let attempt = 1; ; attempt++) {
      // A delete racing every round is a tenant deleting its own queues while it pushes to them: the push then
      // answers that its queue is missing rather than loop.
      created += await unit.run(this.pushes.createQueues(unit.tenantId, names));
      const locked = await unit.run(this.pushes.lockQueues(unit.tenantId, names));
      if (locked.ids.size === names.length || attempt === QUEUE_CREATE_ROUNDS) return { ...locked, created };
    }
  }

  /** Partitions that exist are locked at once; only a push that names a new one inserts, then locks again. */
  private async ensurePartitions(
    unit: UnitOfWork,
    partitions: Array<{ queueId: string; name: string }>,
  ): Promise<{ locked: LockedPartition[]; created: Map<string, number> }> {
    const existing = await unit.run(this.pushes.lockPartitions(unit.tenantId, partitions));
    if (existing.length === partitions.length) return { locked: existing, created: new Map() };
    const created = await unit.run(this.pushes.createPartitions(unit.tenantId, partitions));
    return { locked: await unit.run(this.pushes.lockPartitions(unit.tenantId, partitions)), created };
  }

  private async roomLeft(unit: UnitOfWork, maxSizes: Map<string, number>): Promise<Map<string, number>> {
    const pending = await unit.run(this.pushes.pending(unit.tenantId, [...maxSizes.keys()]));
    return new Map([...maxSizes].map(([queueId, max]) => [queueId, max - (pending.get(queueId) ?? 0)]));
  }
}

interface Slot {
  partition: LockedPartition;
  lastOffset: number;
  stored: number;
}

/** A push whose partitions are locked and whose duplicates are known; see PushService.prepare. */
export interface PreparedPush {
  readonly items: PushItem[];
  /** Per item, the partition it goes to. */
  readonly partitionIds: string[];
  /** Per item, its own or a minted one. */
  readonly transactionIds: string[];
  /** compositeKey(partitionId, transactionId) of the messages already stored, to their ids; write() adds its own. */
  readonly stored: Map<string, string>;
  readonly named: Map<string, Map<string, Slot | undefined>>;
  readonly slots: Slot[];
  readonly maxSizes: Map<string, number>;
  /** Ids of the queues whose new payloads are sealed. */
  readonly encrypted: Set<string>;
  /** Per queue id, the partitions this push created: its store counts them. */
  readonly createdPartitions: ReadonlyMap<string, number>;
}

/** What prepare() locks first: its partitions (undefined when one is missing) and the transactionIds already stored. */
export interface PushLocks {
  locks?: NamedLocks;
  existing?: Map<string, string>;
}

/** Only a transactionId the producer chose can already be stored: one minted here is new by construction. */
function chosenKeys(items: PushItem[]): NamedTransactionKey[] {
  return items.flatMap((item) =>
    item.transactionId === undefined
      ? []
      : [{ queue: item.queue, partition: item.partition, transactionId: item.transactionId }],
  );
}

function partitionsByQueue(items: PushItem[]): Map<string, Map<string, Slot | undefined>> {
  const named = new Map<string, Map<string, Slot | undefined>>();
  for (const item of items) {
    const partitions = named.get(item.queue) ?? new Map<string, Slot | undefined>();
    partitions.set(item.partition, undefined);
    named.set(item.queue, partitions);
  }
  return named;
}

function pushResult(
  index: number,
  messageId: string | null,
  transactionId: string,
  queueName: string,
  status: PushStatus,
): PushResultDto {
  return status === 'failed'
    ? { index, message_id: messageId, transaction_id: transactionId, queueName, status, error: QUEUE_FULL }
    : { index, message_id: messageId, transaction_id: transactionId, queueName, status };
}

function queueDeleted(): ConflictException {
  return new ConflictException({ error: 'a queue was deleted while this push was writing to it; retry' });
}

function throwQueueDeleted(): never {
  throw queueDeleted();
}
