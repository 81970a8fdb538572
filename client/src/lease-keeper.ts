import { LeaseLostError, type LeaseLossKind } from './lease-lost-error';
import { notify } from './notify';
import { linkSignals } from './signals';
import { backoffDelay, MAX_TIMER_MS, monotonicNow } from './timing';
import type { ExtendResult, LeaseStatus, RequestOptions } from './types';

export interface LeaseExtender {
  extend(leaseId: string, seconds: number, options?: RequestOptions): Promise<ExtendResult>;
}

export interface LeaseKeeperOptions {
  leaseId: string;
  leaseSeconds: number;
  // performance.now() just before the pop was sent: the lease began after it, so a deadline
  // counted from it is early, never late.
  acquiredAt?: number | undefined;
  renewFraction?: number | undefined;
  jitter?: number | undefined;
  // Called once, before the end, when the broker's ceiling stops renewals.
  onEnding?: ((notice: LeaseEndingNotice) => void) | undefined;
}

export interface LeaseEndingNotice {
  leaseId: string;
  // Until the local deadline, when the signal aborts with 'ceiling-reached'.
  remainingMs: number;
  // That deadline on the performance.now() clock, for a caller that reads the notice later.
  endsAt: number;
  reason: 'ceiling';
}

const DEFAULT_RENEW_FRACTION = 1 / 3;
const DEFAULT_JITTER = 0.2;
const RETRY_INITIAL_MS = 250;
const MIN_HINTED_DELAY_MS = 50;
const BUSY_RETRY_SECONDS = 0.25;
const MAX_TIMER_SECONDS = Math.floor(MAX_TIMER_MS / 1000);

// Shared with consume, so a bad option fails before the first pop rather than in a worker.
export function checkKeeperOptions(
  options: Pick<LeaseKeeperOptions, 'leaseSeconds' | 'renewFraction' | 'jitter'>,
): void {
  const { leaseSeconds } = options;
  const renewFraction = options.renewFraction ?? DEFAULT_RENEW_FRACTION;
  const jitter = options.jitter ?? DEFAULT_JITTER;
  if (!Number.isInteger(leaseSeconds) || leaseSeconds < 1 || leaseSeconds > MAX_TIMER_SECONDS) {
    throw new RangeError(`leaseSeconds must be an integer from 1 to ${MAX_TIMER_SECONDS}, got ${leaseSeconds}`);
  }
  if (!(renewFraction > 0 && renewFraction < 1)) {
    throw new RangeError(`renewFraction must be between 0 and 1, got ${renewFraction}`);
  }
  if (!(jitter >= 0 && jitter < 1)) {
    throw new RangeError(`jitter must be at least 0 and below 1, got ${jitter}`);
  }
}

export class LeaseKeeper {
  readonly leaseId: string;
  readonly leaseSeconds: number;

  private readonly renewFraction: number;
  private readonly jitter: number;
  private readonly onEnding: ((notice: LeaseEndingNotice) => void) | undefined;
  private readonly lease = new AbortController();
  private readonly requests = new AbortController();
  private deadline: number;
  private renewTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private lastFailure: unknown;
  private stopped = false;
  private endingNotice: LeaseEndingNotice | null = null;

  constructor(
    private readonly client: LeaseExtender,
    options: LeaseKeeperOptions,
  ) {
    checkKeeperOptions(options);
    this.leaseId = options.leaseId;
    this.leaseSeconds = options.leaseSeconds;
    this.renewFraction = options.renewFraction ?? DEFAULT_RENEW_FRACTION;
    this.jitter = options.jitter ?? DEFAULT_JITTER;
    this.onEnding = options.onEnding;
    const acquiredAt = options.acquiredAt ?? monotonicNow();
    this.deadline = acquiredAt + this.leaseMs;
    this.armDeadline();
    this.scheduleRenewal(Math.max(0, acquiredAt + this.renewInterval() - monotonicNow()));
  }

  get signal(): AbortSignal {
    return this.lease.signal;
  }

  get lost(): LeaseLostError | null {
    return this.lease.signal.aborted ? (this.lease.signal.reason as LeaseLostError) : null;
  }

  // Set once the broker's ceiling has stopped renewals; the lease then ends at the deadline.
  get ending(): LeaseEndingNotice | null {
    return this.endingNotice;
  }

  stop(): void {
    this.stopped = true;
    this.clearTimers();
    this.requests.abort();
  }

  private get leaseMs(): number {
    return this.leaseSeconds * 1000;
  }

  private get finished(): boolean {
    return this.stopped || this.lease.signal.aborted;
  }

  private renewInterval(): number {
    return this.leaseMs * this.renewFraction * (1 - this.jitter * Math.random());
  }

  private scheduleRenewal(delayMs: number): void {
    this.renewTimer = setTimeout(() => void this.renew(), delayMs);
    this.renewTimer.unref();
  }

  // The broker spreads renewals with its hint, later than our own schedule if it likes, but
  // never so late that one attempt's full budget no longer fits before the local deadline,
  // nor so soon that a hint of 0 turns into a busy loop.
  private hintedDelay(renewAfterSeconds: number): number {
    const latest = this.deadline - monotonicNow() - this.leaseMs * this.renewFraction;
    return Math.max(MIN_HINTED_DELAY_MS, Math.min(renewAfterSeconds * 1000, latest));
  }

  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(
      () =>
        this.endingNotice === null
          ? this.lose('deadline-passed', { cause: this.lastFailure })
          : this.lose('ceiling-reached'),
      Math.max(0, this.deadline - monotonicNow()),
    );
    this.deadlineTimer.unref();
  }

  private async renew(): Promise<void> {
    this.renewTimer = undefined;
    const sentAt = monotonicNow();
    // A renewal that hangs must not hold up the next attempt, and one answering after the
    // deadline is worthless: give each attempt until whichever comes first.
    const attempt = linkSignals(
      [this.requests.signal],
      Math.max(1, Math.min(this.leaseMs * this.renewFraction, this.deadline - sentAt)),
    );
    let result: ExtendResult;
    try {
      result = await this.client.extend(this.leaseId, this.leaseSeconds, {
        signal: attempt.signal,
      });
    } catch (error) {
      if (this.finished) {
        return;
      }
      this.failures += 1;
      this.lastFailure = error;
      const retryMs = Math.min(this.renewInterval(), backoffDelay(this.failures, RETRY_INITIAL_MS, this.leaseMs));
      this.scheduleRenewal(retryMs);
      return;
    } finally {
      attempt.unlink();
    }
    if (this.finished) {
      return;
    }
    if (result.lost) {
      this.lose('not-renewed', {
        leaseStatus: result.leaseStatus ?? undefined,
      });
      return;
    }
    this.failures = 0;
    this.lastFailure = undefined;
    const renewAfter = hintSeconds(result.renewAfterSeconds);
    if (result.busy) {
      // Some rows kept their old expiry: the local deadline stays, and the next attempt comes soon.
      this.scheduleRenewal(this.hintedDelay(renewAfter ?? BUSY_RETRY_SECONDS));
      return;
    }
    const hardEnd = hintSeconds(result.deadlineSeconds);
    // The broker set the expiry to at least its now() + leaseSeconds, and its now() was no
    // earlier than our send: counting from the send keeps the local deadline on the safe side.
    this.deadline = Math.max(this.deadline, sentAt + this.leaseMs);
    if (hardEnd !== null) {
      // Likewise for the hard end, which also cuts a deadline counted from a pop whose lease
      // the ceiling made shorter than leaseSeconds.
      this.deadline = Math.min(this.deadline, sentAt + hardEnd * 1000);
    }
    this.armDeadline();
    if (hardEnd !== null && (renewAfter === null || hardEnd <= this.leaseSeconds)) {
      this.announceEnding();
    } else {
      this.scheduleRenewal(renewAfter === null ? this.renewInterval() : this.hintedDelay(renewAfter));
    }
  }

  // Renewing again would gain nothing: say so while there is still time left to use.
  private announceEnding(): void {
    const notice: LeaseEndingNotice = {
      leaseId: this.leaseId,
      remainingMs: Math.max(0, this.deadline - monotonicNow()),
      endsAt: this.deadline,
      reason: 'ceiling',
    };
    this.endingNotice = notice;
    notify(() => this.onEnding?.(notice));
  }

  private lose(kind: LeaseLossKind, details: { cause?: unknown; leaseStatus?: LeaseStatus | undefined } = {}): void {
    if (this.finished) {
      return;
    }
    this.clearTimers();
    this.requests.abort();
    this.lease.abort(new LeaseLostError(this.leaseId, kind, details));
  }

  private clearTimers(): void {
    clearTimeout(this.renewTimer);
    clearTimeout(this.deadlineTimer);
    this.renewTimer = undefined;
    this.deadlineTimer = undefined;
  }
}

// An extender other than LeaseholdClient may predate the hints or get them wrong: anything
// but a finite, non-negative number is no hint.
function hintSeconds(value: number | null | undefined): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}
