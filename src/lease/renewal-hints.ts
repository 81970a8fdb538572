import type { LeaseRenewal } from './lease.repository';

/** Seconds (decimal) after which to renew next; absent once renewing can extend nothing more. */
export const RENEW_AFTER_HEADER = 'Leasehold-Renew-After';
/** Seconds (decimal) until the lease's hard end under LEASE_MAX_TOTAL_SECONDS; absent without a ceiling. */
export const DEADLINE_AFTER_HEADER = 'Leasehold-Deadline-After';
/** On `renewed: 0` only: `expired` (the caller's lease ran out unrenewed) or `unknown` (anything else). */
export const LEASE_STATUS_HEADER = 'Leasehold-Lease-Status';

/** The next renewal is due after this share of what remains, less up to RENEW_JITTER of it. */
export const RENEW_FRACTION = 1 / 3;
export const RENEW_JITTER = 0.2;

/** Within a millisecond of its ceiling the lease's expiry counts as at it. */
const AT_CEILING_SLACK_SECONDS = 0.001;

export type LeaseStatus = 'expired' | 'unknown';

/** What an extend answer tells its caller besides its body, in response headers. */
export interface RenewalHints {
  renewAfterSeconds?: number;
  deadlineSeconds?: number;
  status?: LeaseStatus;
}

/** Whether a renewal left the lease at its ceiling, where further renewals extend nothing. */
export function atCeiling(renewal: LeaseRenewal): boolean {
  const { remainingSeconds, deadlineSeconds } = renewal;
  return (
    remainingSeconds !== undefined &&
    deadlineSeconds !== undefined &&
    remainingSeconds >= deadlineSeconds - AT_CEILING_SLACK_SECONDS
  );
}

/**
 * The hints for one renewal. The renewal hint is a jittered share of the
 * time left, so that workers that popped together drift apart instead of
 * renewing in lockstep; `random` is injectable for tests.
 */
export function renewalHints(renewal: LeaseRenewal, random: () => number = Math.random): RenewalHints {
  if (renewal.renewed === 0) return { status: renewal.held ? 'expired' : 'unknown' };
  const hints: RenewalHints = {};
  if (renewal.deadlineSeconds !== undefined) hints.deadlineSeconds = Math.max(0, renewal.deadlineSeconds);
  if (renewal.remainingSeconds !== undefined && !atCeiling(renewal)) {
    hints.renewAfterSeconds = Math.max(0, renewal.remainingSeconds * RENEW_FRACTION * (1 - RENEW_JITTER * random()));
  }
  return hints;
}

/** The hints as response headers, seconds with millisecond precision. */
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
