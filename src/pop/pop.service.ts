import { MAINTENANCE_REFRESH_MS, MaintenanceService } from '../maintenance/maintenance.service';
import { isDeepStrictEqual } from 'node:util';
import { HttpStatus, Inject, Injectable, Logger } from '@nestjs/common';
import { databaseFailureOf, DatabaseTimeoutError } from '../common/database-errors';
import { JsonText } from '../common/json-text';
import { LaterAnswer, whenAnswered } from '../common/later-answer';
import { HangUpSignal } from '../common/client-abort.decorator';
import { RetryLaterException } from '../common/retry-later.exception';
import { KeyedSemaphore, TurnTimeoutError } from '../common/semaphore';
import { uuidv7 } from '../common/uuid';
import { compositeKey } from '../common/composite-key';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { monotonicNow } from '../database/deadline';
import { TenantQuotas } from '../limits/tenant-quotas';
import { ShuttingDownException } from '../lifecycle/shutting-down.exception';
import { HistoryRecorder } from '../history/history-recorder';
import { MetricsService } from '../metrics/metrics.service';
import { LeaseExpiryService } from '../wakeup/lease-expiry.service';
import { LongPoll, ParkedPolls, WaitOutcome, Waiter, WakeupSubscription } from '../wakeup/parked-polls';
import { Writes } from '../wakeup/writes';
import { HandedOutLeases } from '../ack/handed-out-leases';
import { popAnswerJson } from './dto/pop-response.dto';
import { PopOptions } from './pop-query.pipe';
import { ClaimedMessage, ClaimRequest, PopRepository, PopTarget } from './pop.repository';
import type { Statement } from '../database/statement';
import type { UnitOfWork } from '../database/unit-of-work';
import { errorMessage } from '../common/error-message';

const ANSWER_ENVELOPE_BYTES = 2_048;
/** A tenant's long polls claim through this share of the pool at once; the rest queue for it. */
const POLL_CLAIMS_PER_POOL = 0.25;
const RETRY_AFTER_FAILURE_MS = 250;
export const DISCOVERY_MAX_QUEUES = 100;
/** Filters whose matching queues are remembered for a second, for the polls that wait on them. */
const DISCOVERY_CACHE_ENTRIES = 10_000;
/** Queues, groups and partitions whose pops claim on what they saw before (PopService.claim), the oldest forgotten. */
const TARGET_CACHE_ENTRIES = 10_000;
/** Past the instant a delayed message or a window comes due, so the next look finds it due by the database clock. */
const DUE_SLACK_MS = 20;
export const TOO_MANY_WAITING = 'too many waiting pops';

interface Attempt {
  delivery?: JsonText;
  failed?: boolean;
  dueInMs?: number;
  /** The group has partitions left to look through: nothing found yet is not nothing there. */
  backfilling?: boolean;
}

/** What a unit claimed: `request` undefined when there was nothing to claim from. */
interface Planned {
  claimed: ClaimedMessage[];
  request?: ClaimRequest;
  backfilling?: boolean;
}

/** The claim on a target, as the unit sends it. */
type ClaimOn = (target: PopTarget) => { request: ClaimRequest; claim: Statement<ClaimedMessage[]> };

/** Every field compared, so a field added to PopTarget is compared too. */
function sameTarget(a: PopTarget, b: PopTarget | undefined): boolean {
  return b !== undefined && isDeepStrictEqual(a, b);
}

/** Partitions a new group looks through per step (PopRepository.backfill); a step takes tens of milliseconds. */
const BACKFILL_STEP = 1_000;
/** How long one look may go on taking steps while it finds nothing, before it answers what it has. */
const BACKFILL_BUDGET_MS = 250;

@Injectable()
export class PopService {
  private readonly logger = new Logger(PopService.name);
  private readonly answerBudget: number;
  private readonly pollClaims: KeyedSemaphore;
  private readonly maxTotalSeconds: number | undefined;
  private readonly discovered = new Map<string, { at: number; queues: Promise<string[]> }>();
  /** What pops last saw of a queue, group and partition they may claim on at once (remember). */
  private readonly targets = new Map<string, PopTarget>();

  constructor(
    private readonly maintenance: MaintenanceService,
    private readonly writes: Writes,
    private readonly pops: PopRepository,
    private readonly polls: ParkedPolls,
    private readonly expiries: LeaseExpiryService,
    private readonly metrics: MetricsService,
    private readonly quotas: TenantQuotas,
    private readonly history: HistoryRecorder,
    private readonly handedOutLeases: HandedOutLeases,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.answerBudget = config.limits.responseMaxBytes - ANSWER_ENVELOPE_BYTES;
    this.maxTotalSeconds = config.leaseMaxTotalSeconds;
    this.pollClaims = new KeyedSemaphore(Math.max(1, Math.floor(config.database.poolSize * POLL_CLAIMS_PER_POOL)));
  }

  pop(
    tenantId: string,
    queue: string,
    partition: string | undefined,
    options: PopOptions,
    signal: HangUpSignal,
  ): Promise<JsonText | undefined> {
    return this.popOrPark(tenantId, queue, partition, options, signal).then(whenAnswered);
  }

  /**
   * As pop, but a poll that finds nothing answers a LaterAnswer at once and waits as a PollRun: while it is parked no
   * async frame is held between the route and the wait (see LaterAnswer).
   */
  async popOrPark(
    tenantId: string,
    queue: string,
    partition: string | undefined,
    options: PopOptions,
    signal: HangUpSignal,
  ): Promise<JsonText | undefined | LaterAnswer<JsonText | undefined>> {
    // This request's own copy: a first pop may fix its starting point for the attempts after it.
    options = { ...options };
    const deadline = Date.now() + options.timeoutMs;
    const poll = options.wait ? this.polls.begin(tenantId) : undefined;
    if (poll?.refused) throw new RetryLaterException(HttpStatus.TOO_MANY_REQUESTS, TOO_MANY_WAITING, 1);
    const run = new PollRun(this, this.polls, tenantId, queue, partition, options, signal, poll, deadline);
    try {
      if (await run.attempt()) return run.later!;
    } catch (error) {
      poll?.end();
      throw error;
    }
    return run.finished();
  }

  async discover(
    tenantId: string,
    filter: { namespace: string | undefined; task: string | undefined },
    options: PopOptions,
    signal: HangUpSignal,
  ): Promise<JsonText | undefined> {
    const delivery = await this.pollMany(tenantId, filter, options, signal);
    this.counted(delivery);
    return delivery;
  }

  /** A long poll counts as one from its first look to its answer; each look ends it if its client has gone. */
  private async pollMany(
    tenantId: string,
    filter: { namespace: string | undefined; task: string | undefined },
    options: PopOptions,
    signal: HangUpSignal,
  ): Promise<JsonText | undefined> {
    options = { ...options };
    const deadline = Date.now() + options.timeoutMs;
    const poll = options.wait ? this.polls.begin(tenantId) : undefined;
    if (poll?.refused) throw new RetryLaterException(HttpStatus.TOO_MANY_REQUESTS, TOO_MANY_WAITING, 1);
    let woken = false;
    try {
      for (;;) {
        if (signal.aborted) return undefined;
        const queues = await this.matchingQueues(tenantId, filter, options, deadline).catch((error: unknown) => {
          // No turn before the deadline, or a failed lookup once parked (which never answers 5xx): none this time.
          if (error instanceof TurnTimeoutError || (woken && databaseFailureOf(error))) return [];
          throw error;
        });
        const subscriptions = poll
          ? queues.map((queue) => this.polls.subscribe(poll, queue, options.consumerGroup, undefined))
          : [];
        try {
          // No queue matches yet: look again soon, one may be configured.
          let again = queues.length === 0 ? MAINTENANCE_REFRESH_MS : undefined;
          for (const queue of queues) {
            if (signal.aborted) return undefined;
            const attempt = await this.look(tenantId, queue, undefined, options, deadline, woken, signal);
            if (attempt.delivery) return attempt.delivery;
            const inMs = lookAgainIn(attempt);
            if (inMs !== undefined) again = Math.min(again ?? Infinity, inMs);
          }
          const remaining = Math.max(0, deadline - Date.now());
          if (!poll || remaining === 0) return undefined;
          const outcome = await firstOf(subscriptions, Math.min(remaining, again ?? remaining), signal);
          if (outcome === 'closing') throw new ShuttingDownException();
          if (outcome === 'aborted' || (outcome === 'timeout' && Date.now() >= deadline)) return undefined;
          woken = true;
        } finally {
          for (const subscription of subscriptions) subscription.close();
        }
      }
    } finally {
      poll?.end();
    }
  }

  /**
   * Waiting polls of one filter share one lookup a second, through their tenant's share of the pool: a thousand polls
   * for a namespace nobody has configured yet cost one statement a second, not a thousand.
   */
  private matchingQueues(
    tenantId: string,
    filter: { namespace: string | undefined; task: string | undefined },
    options: PopOptions,
    deadline: number,
  ): Promise<string[]> {
    const lookup = () =>
      this.writes.run(tenantId, (unit) => unit.run(this.pops.discover(tenantId, filter, DISCOVERY_MAX_QUEUES)));
    if (!options.wait) return lookup();
    const key = compositeKey(tenantId, filter.namespace ?? '', filter.task ?? '');
    const now = monotonicNow();
    const known = this.discovered.get(key);
    if (known && now - known.at < MAINTENANCE_REFRESH_MS) return known.queues;
    const queues = this.pollClaims.run(tenantId, lookup, Math.max(1, deadline - Date.now()));
    this.discovered.delete(key);
    this.discovered.set(key, { at: now, queues });
    // A failed lookup is not kept: the next poll asks again.
    queues.catch(() => {
      if (this.discovered.get(key)?.queues === queues) this.discovered.delete(key);
    });
    if (this.discovered.size > DISCOVERY_CACHE_ENTRIES) this.discovered.delete(this.discovered.keys().next().value!);
    return queues;
  }

  /** One look for messages: PollRun's, and the discovery poll's. */
  look(
    tenantId: string,
    queue: string,
    partition: string | undefined,
    options: PopOptions,
    deadline: number,
    woken: boolean,
    signal: HangUpSignal,
  ): Promise<Attempt> {
    if (this.maintenance.popsArePaused(tenantId)) return Promise.resolve({ dueInMs: MAINTENANCE_REFRESH_MS });
    return options.wait
      ? this.pollClaim(tenantId, queue, partition, options, deadline, woken, signal)
      : this.claimThrough(tenantId, queue, partition, options, signal);
  }

  /** Claims again while the group is still looking through its partitions and nothing came of it, within a budget. */
  private async claimThrough(
    tenantId: string,
    queue: string,
    partition: string | undefined,
    options: PopOptions,
    signal: HangUpSignal,
  ): Promise<Attempt> {
    const until = monotonicNow() + BACKFILL_BUDGET_MS;
    for (;;) {
      const attempt = await this.claim(tenantId, queue, partition, options, signal);
      if (!attempt.backfilling || attempt.delivery || signal.aborted || monotonicNow() >= until) return attempt;
    }
  }

  private async pollClaim(
    tenantId: string,
    queue: string,
    partition: string | undefined,
    options: PopOptions,
    deadline: number,
    woken: boolean,
    signal: HangUpSignal,
  ): Promise<Attempt> {
    // Its turn may come after the client has gone.
    const claim = () =>
      signal.aborted ? Promise.resolve({}) : this.claimThrough(tenantId, queue, partition, options, signal);
    try {
      return await this.pollClaims.run(tenantId, claim, deadline - Date.now());
    } catch (error) {
      if (error instanceof TurnTimeoutError) return {};
      if (!woken || !databaseFailureOf(error)) throw error;
      this.logger.warn(`A woken long poll could not claim (${databaseFailureOf(error)}); it retries shortly`);
      return { failed: true };
    }
  }

  /**
   * A pop whose queue, group and cursor it has seen before claims on what it saw, in one round trip with a fresh look
   * at them (the claim holds the queue to what it was planned with, so one configured since claims nothing); when that
   * look finds them changed and nothing was claimed, or when they were never seen, it looks first and then claims. A
   * change that lands between the look and the claim makes that one pop find nothing; the next one sees it.
   */
  private async claim(
    tenantId: string,
    queueName: string,
    partitionName: string | undefined,
    options: PopOptions,
    signal: HangUpSignal,
  ): Promise<Attempt> {
    const key = compositeKey(tenantId, queueName, options.consumerGroup, partitionName ?? '');
    const target = () => this.pops.target(tenantId, queueName, partitionName, options.consumerGroup);
    const known = this.targets.get(key);
    if (known) {
      const attempt = await this.claimOnce(tenantId, queueName, options, signal, async (unit, claimOn) => {
        const { request, claim } = claimOn(known);
        // The claim last: its locks are taken after the look, at the end of the round trip.
        const [seen, claimed] = await unit.commitWithAll([target(), claim] as const);
        this.remember(key, seen);
        return claimed.length > 0 || sameTarget(known, seen) ? { claimed, request } : undefined;
      });
      if (attempt) return attempt;
    }
    const attempt = await this.claimOnce(tenantId, queueName, options, signal, async (unit, claimOn) => {
      const seen = await unit.run(target());
      this.remember(key, seen);
      return this.prepareAndClaim(unit, tenantId, partitionName, options, seen, claimOn);
    });
    return attempt!;
  }

  /** Remembers what a pop saw of its queue, group and cursor, when a claim on it needs nothing made first. */
  private remember(key: string, target: PopTarget | undefined): void {
    const known = this.targets.get(key);
    // Unchanged, the entry stays: a long-lived map rewritten at every pop would keep each pop's objects alive.
    if (known && sameTarget(known, target)) return;
    this.targets.delete(key);
    if (!target?.groupExists || target.backfilling || (target.partitionId !== null && !target.hasCursor)) return;
    this.targets.set(key, target);
    if (this.targets.size > TARGET_CACHE_ENTRIES) this.targets.delete(this.targets.keys().next().value!);
  }

  /** What the first pop of a queue, a group or a partition makes before claiming, then the claim. */
  private async prepareAndClaim(
    unit: UnitOfWork,
    tenantId: string,
    partitionName: string | undefined,
    options: PopOptions,
    target: PopTarget | undefined,
    claimOn: ClaimOn,
  ): Promise<Planned> {
    // Nothing is created here: a long poll parks, and the push that creates the queue or partition wakes it.
    if (!target || (partitionName !== undefined && target.partitionId === null)) {
      // "new" means messages from this first pop on, also when the queue comes later.
      if (options.subscriptionMode === 'new' && options.subscriptionFrom === undefined) {
        options.subscriptionFrom = await unit.run(this.pops.databaseNow());
      }
      return { claimed: [] };
    }
    if (!target.groupExists) {
      const created = await this.pops.ensureGroup(unit, tenantId, target.queueId, options.consumerGroup, {
        newOnly: options.subscriptionMode === 'new',
        from: options.subscriptionFrom,
      });
      await this.quotas.admit(tenantId, 'consumerGroups', created ? 1 : 0, unit);
    }
    let backfilling = false;
    // Cursors are made when first needed: for the partition named, or a step through the queue's partitions.
    if (target.partitionId !== null) {
      if (!target.hasCursor) {
        await unit.run(this.pops.ensureCursor(tenantId, target.queueId, target.partitionId, options.consumerGroup));
      }
    } else if (target.backfilling || !target.groupExists) {
      const step = await unit.run(this.pops.backfill(tenantId, target.queueId, options.consumerGroup, BACKFILL_STEP));
      // None taken: nothing left to look through, or another pop of the group is taking the step.
      backfilling = step === undefined ? target.backfilling : !step.done;
    }
    const { request, claim } = claimOn(target);
    // Nothing follows the claim but reads, so it commits in its own round trip.
    return { claimed: await unit.commitWith(claim), request, backfilling };
  }

  /**
   * One unit that claims as `plan` does: undefined when the plan claimed nothing on what it knew and a pop should look
   * again. The lease id is minted once: an attempt the database rolled back (and that Writes runs again) granted
   * nothing.
   */
  private async claimOnce(
    tenantId: string,
    queueName: string,
    options: PopOptions,
    signal: HangUpSignal,
    plan: (unit: UnitOfWork, claimOn: ClaimOn) => Promise<Planned | undefined>,
  ): Promise<Attempt | undefined> {
    const leaseId = uuidv7();
    let claimSentAt = 0;
    let late = false;
    let leased = false;
    const claimOn: ClaimOn = (target) => {
      // A lease may not outlast the ceiling from its first second.
      const leaseSeconds = Math.min(options.leaseSeconds ?? target.leaseTime, this.maxTotalSeconds ?? Infinity);
      const request: ClaimRequest = {
        queueId: target.queueId,
        partitionId: target.partitionId ?? undefined,
        consumerGroup: options.consumerGroup,
        leaseId,
        leaseSeconds,
        leaseTime: target.leaseTime,
        batch: options.batch,
        maxPartitions: options.partitions,
        autoAck: options.autoAck,
        maxBytes: this.answerBudget,
        maxTotalSeconds: this.maxTotalSeconds,
        delayedProcessing: target.delayedProcessing,
        windowBuffer: target.windowBuffer,
        retryDelayMs: target.retryDelayMs,
      };
      claimSentAt = monotonicNow();
      leased = !options.autoAck;
      return { request, claim: this.pops.claim(tenantId, request) };
    };
    const work = this.writes.run(tenantId, async (unit) => {
      late = false;
      leased = false;
      const planned = await plan(unit, claimOn);
      if (!planned) return undefined;
      const { claimed, request, backfilling = false } = planned;
      leased &&= claimed.length > 0;
      let dueInMs: number | undefined;
      if (
        request &&
        claimed.length === 0 &&
        (request.delayedProcessing > 0 || request.windowBuffer > 0 || request.retryDelayMs > 0)
      ) {
        dueInMs = await unit.run(this.pops.nextDueInMs(tenantId, request));
      }
      if (request && claimed.length > 0) {
        unit.afterCommit(() => {
          // The lease runs from the claim, which the server ran after claimSentAt. A lease that may already be over
          // is not handed out: it is released below, and the next pop gets the batch with a live lease.
          late = !options.autoAck && monotonicNow() - claimSentAt >= request.leaseSeconds * 1000;
          if (!late && !(leased && signal.aborted)) {
            this.handedOut(tenantId, queueName, options, claimed, request.leaseSeconds);
          }
        });
      }
      return { claimed, leaseSeconds: request?.leaseSeconds ?? 0, dueInMs, backfilling };
    });
    // Once the claim went out, its COMMIT may have reached the server although the pop gave up.
    const done = await work.catch((error: unknown) => {
      if (leased) this.releaseUnused(tenantId, queueName, options.consumerGroup, leaseId);
      throw error;
    });
    if (!done) return undefined;
    const { claimed, leaseSeconds, dueInMs, backfilling } = done;
    if (claimed.length === 0) return { dueInMs, backfilling };
    if (late) {
      this.releaseUnused(tenantId, queueName, options.consumerGroup, leaseId);
      throw new DatabaseTimeoutError(leaseSeconds * 1000);
    }
    // Its client went while it claimed: give the batch back rather than lease it to nobody.
    if (leased && signal.aborted) {
      this.releaseUnused(tenantId, queueName, options.consumerGroup, leaseId);
      return {};
    }
    return { delivery: this.answer(queueName, claimed) };
  }

  /** Best effort, not awaited: when the database is unreachable too, the lease expires at its time. */
  private releaseUnused(tenantId: string, queue: string, consumerGroup: string, leaseId: string): void {
    this.writes
      .run(tenantId, async (unit) => {
        const partitions = await unit.run(this.pops.release(tenantId, leaseId));
        if (partitions.size > 0) unit.redeliver({ queue, consumerGroup, partitions });
        return partitions.size;
      })
      .then(
        (released) => {
          if (released > 0) this.logger.warn(`Lease ${leaseId} of a pop that gave up was released`);
        },
        (error: unknown) => {
          const reason = databaseFailureOf(error) ?? errorMessage(error);
          this.logger.warn(`Lease ${leaseId} of a pop that gave up could not be released (${reason}); it expires`);
        },
      );
  }

  private handedOut(
    tenantId: string,
    queue: string,
    options: PopOptions,
    claimed: ClaimedMessage[],
    leaseSeconds: number,
  ): void {
    this.count(tenantId, queue, claimed, options.autoAck);
    if (options.autoAck) return;
    this.handedOutLeases.handedOut(tenantId, queue, options.consumerGroup, claimed);
    const partitions = new Map<string, number>();
    for (const { partition } of claimed) partitions.set(partition, (partitions.get(partition) ?? 0) + 1);
    this.expiries.leased(tenantId, queue, options.consumerGroup, partitions, leaseSeconds * 1000);
  }

  /** A pop ended: with messages, or empty. */
  counted(delivery: JsonText | undefined): void {
    this.metrics.pops.inc({ outcome: delivery ? 'messages' : 'empty' });
  }

  private count(tenantId: string, queue: string, claimed: ClaimedMessage[], autoAck: boolean): void {
    const labels = this.metrics.queue(tenantId, queue);
    this.metrics.poppedMessages.inc(labels, claimed.length);
    let oldest = claimed[0].createdAt;
    for (const message of claimed) if (message.createdAt < oldest) oldest = message.createdAt;
    this.history.popped(tenantId, queue, claimed.length, oldest);
    // Delivered and committed at once: consumed, as far as the chart of acks is concerned.
    if (autoAck) this.history.acked(tenantId, queue, claimed.length);
    const lost = claimed.filter((message) => message.leaseLost);
    if (lost.length === 0) return;
    this.metrics.leasesLost.inc(labels, new Set(lost.map((message) => message.partitionId)).size);
    this.metrics.redeliveredMessages.inc({ ...labels, cause: 'expiry' }, lost.length);
  }

  private answer(queue: string, claimed: ClaimedMessage[]): JsonText {
    return new JsonText(popAnswerJson(queue, claimed));
  }
}

/** When a parked poll should look again without a wakeup: after a failed claim, or once something comes due. */
function lookAgainIn(attempt: Attempt): number | undefined {
  if (attempt.failed) return RETRY_AFTER_FAILURE_MS;
  if (attempt.backfilling) return 0;
  return attempt.dueInMs === undefined ? undefined : Math.max(0, attempt.dueInMs) + DUE_SLACK_MS;
}

async function firstOf(
  subscriptions: WakeupSubscription[],
  timeoutMs: number,
  signal: HangUpSignal,
): Promise<WaitOutcome> {
  // An abort before this call fired no event anyone could hear.
  if (signal.aborted) return 'aborted';
  const done = new AbortController();
  const stop = (): void => done.abort();
  signal.addEventListener('abort', stop);
  try {
    if (subscriptions.length === 0) {
      return await new Promise<WaitOutcome>((resolve) => {
        const timer = setTimeout(() => resolve('timeout'), timeoutMs);
        done.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve('aborted');
        });
      });
    }
    return await Promise.race(subscriptions.map((subscription) => subscription.wait(timeoutMs, done.signal)));
  } finally {
    signal.removeEventListener('abort', stop);
    done.abort();
  }
}

/**
 * One long poll on a queue (or one partition), from its first look to its answer. The wakeup subscription is taken
 * before each look, so work committed during the look still wakes it. Parked, it is what the poll holds: this record,
 * its subscription and its LaterAnswer (no frame, promise, closure or timer of its own).
 */
class PollRun implements Waiter {
  later: LaterAnswer<JsonText | undefined> | undefined = undefined;
  private delivery: JsonText | undefined = undefined;
  private woken = false;
  private subscription: WakeupSubscription | undefined = undefined;
  /** The wait's timeout is one before looking again (a failed claim, something coming due), not the poll's end. */
  private lookAgain = false;

  constructor(
    private readonly service: PopService,
    private readonly polls: ParkedPolls,
    private readonly tenantId: string,
    private readonly queue: string,
    private readonly partition: string | undefined,
    private readonly options: PopOptions,
    private readonly signal: HangUpSignal,
    private readonly poll: LongPoll | undefined,
    private readonly deadline: number,
  ) {}

  /** Looks once; true when it parked (and `later` will answer), false when `finished()` has the answer. */
  async attempt(): Promise<boolean> {
    if (this.signal.aborted) return false;
    const { poll, options } = this;
    const subscription = poll
      ? this.polls.subscribe(poll, this.queue, options.consumerGroup, this.partition)
      : undefined;
    let parked = false;
    try {
      const attempt = await this.service.look(
        this.tenantId,
        this.queue,
        this.partition,
        options,
        this.deadline,
        this.woken,
        this.signal,
      );
      if (attempt.delivery || !subscription) {
        this.delivery = attempt.delivery;
        return false;
      }
      const remaining = Math.max(0, this.deadline - Date.now());
      const again = lookAgainIn(attempt);
      this.lookAgain = again !== undefined;
      this.later ??= new LaterAnswer();
      this.subscription = subscription;
      parked = true;
      subscription.await(again === undefined ? remaining : Math.min(remaining, again), this.signal, this);
      return true;
    } finally {
      if (!parked) subscription?.close();
    }
  }

  settled(outcome: WaitOutcome): void {
    this.subscription?.close();
    this.subscription = undefined;
    if (outcome === 'closing') return this.fail(new ShuttingDownException());
    if (outcome === 'aborted' || (outcome === 'timeout' && (!this.lookAgain || Date.now() >= this.deadline))) {
      return this.later!.answer(this.finished());
    }
    this.woken = true;
    this.attempt().then(
      (parked) => {
        if (!parked) this.later!.answer(this.finished());
      },
      (error: unknown) => this.fail(error),
    );
  }

  /** The poll's answer, counted; it no longer counts as waiting. */
  finished(): JsonText | undefined {
    this.poll?.end();
    this.service.counted(this.delivery);
    return this.delivery;
  }

  private fail(error: unknown): void {
    this.poll?.end();
    this.later!.fail(error);
  }
}
