export type LeaseLossKind = 'not-renewed' | 'deadline-passed' | 'ack-rejected';

export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';

  constructor(
    readonly leaseId: string,
    readonly kind: LeaseLossKind,
    options?: { cause?: unknown },
  ) {
    super(LeaseLostError.describe(leaseId, kind), options);
  }

  private static describe(leaseId: string, kind: LeaseLossKind): string {
    switch (kind) {
      case 'not-renewed':
        return `lease ${leaseId} is lost: the broker renewed nothing`;
      case 'deadline-passed':
        return `lease ${leaseId} is lost: its deadline passed without a successful renewal`;
      case 'ack-rejected':
        return `lease ${leaseId} is lost: the broker refused the ack as invalid or expired`;
    }
  }
}
