import type { LeaseRenewal } from './lease.repository';

export const RENEW_AFTER_HEADER = 'Leasehold-Renew-After';
export const DEADLINE_AFTER_HEADER = 'Leasehold-Deadline-After';
export const LEASE_STATUS_HEADER = 'Leasehold-Lease-Status';

export const RENEW_FRACTION = 1 / 3;
export const RENEW_JITTER = 0.2;

const AT_CEILING_SLACK_SECONDS = 0.001;

/** How soon to renew again when rows were busy: another transaction holds them for about one statement, not longer. */
export const BUSY_RENEW_AFTER_SECONDS = 0.25;

export type LeaseStatus = 'expired' | 'unknown' | 'busy';

export interface RenewalHints {
  renewAfterSeconds?: number;
  deadlineSeconds?: number;
  status?: LeaseStatus;
}

export function atCeiling(renewal: LeaseRenewal): boolean {
  const { remainingSeconds, deadlineSeconds } = renewal;
  return (
    remainingSeconds !== undefined &&
    deadlineSeconds !== undefined &&
    remainingSeconds >= deadlineSeconds - AT_CEILING_SLACK_SECONDS
  );
}

/** Jittered so that workers that popped together drift apart instead of renewing in lockstep. */
export function renewalHints(renewal: LeaseRenewal, random: () => number = Math.random): RenewalHints {
  const busyRetry = (): number => BUSY_RENEW_AFTER_SECONDS * (1 - RENEW_JITTER * random());
  if (renewal.renewed === 0) {
    return renewal.busy
      ? { status: 'busy', renewAfterSeconds: busyRetry() }
      : { status: renewal.held ? 'expired' : 'unknown' };
  }
  const hints: RenewalHints = {};
  if (renewal.busy) hints.status = 'busy';
  if (renewal.deadlineSeconds !== undefined) hints.deadlineSeconds = Math.max(0, renewal.deadlineSeconds);
  if (renewal.remainingSeconds !== undefined && !atCeiling(renewal)) {
    hints.renewAfterSeconds = Math.max(0, renewal.remainingSeconds * RENEW_FRACTION * (1 - RENEW_JITTER * random()));
  }
  // The rows left busy keep their old expiry: renew again soon, for them.
  if (renewal.busy) hints.renewAfterSeconds = Math.min(hints.renewAfterSeconds ?? Infinity, busyRetry());
  return hints;
}

export function hintHeaders(hints: RenewalHints): Array<[string, string]> {
  const headers: Array<[string, string]> = [];
  if (hints.renewAfterSeconds !== undefined) headers.push([RENEW_AFTER_HEADER, seconds(hints.renewAfterSeconds)]);
  if (hints.deadlineSeconds !== undefined) headers.push([DEADLINE_AFTER_HEADER, seconds(hints.deadlineSeconds)]);
  if (hints.status !== undefined) headers.push([LEASE_STATUS_HEADER, hints.status]);
  return headers;
}

function seconds(value: number): string {
  return value.toFixed(3);
}
