import type { LeaseStatus } from './types';

export type LeaseLossKind = 'not-renewed' | 'deadline-passed' | 'ceiling-reached' | 'ack-rejected' | 'commit-rejected';

export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  // Why the broker renewed nothing, when it said.
  readonly leaseStatus?: LeaseStatus;

  constructor(
    readonly leaseId: string,
    readonly kind: LeaseLossKind,
    options?: { cause?: unknown; leaseStatus?: LeaseStatus | undefined },
  ) {
    super(
      LeaseLostError.describe(leaseId, kind, options?.leaseStatus),
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    if (options?.leaseStatus !== undefined) {
      this.leaseStatus = options.leaseStatus;
    }
  }

  private static describe(leaseId: string, kind: LeaseLossKind, leaseStatus: LeaseStatus | undefined): string {
    switch (kind) {
      case 'not-renewed':
        return leaseStatus === undefined
          ? `lease ${leaseId} is lost: the broker renewed nothing`
          : `lease ${leaseId} is lost: the broker renewed nothing (${leaseStatus})`;
      case 'deadline-passed':
        return `lease ${leaseId} is lost: its deadline passed without a successful renewal`;
      case 'ceiling-reached':
        return `lease ${leaseId} is lost: it reached the broker's ceiling on total lease length`;
      case 'ack-rejected':
        return `lease ${leaseId} is lost: the broker refused the ack as invalid or expired`;
      case 'commit-rejected':
        return `lease ${leaseId} is lost: the broker rolled the transaction back (lease_lost)`;
    }
  }
}
