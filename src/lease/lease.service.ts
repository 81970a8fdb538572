import { Inject, Injectable, Logger } from '@nestjs/common';
import { DatabaseFailureException } from '../common/database-errors';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { ExtendLeaseResponseDto } from './dto/extend-lease-response.dto';
import { LeaseRenewal, RenewalFailedError } from './lease.repository';
import { RenewalBatcher } from './renewal-batcher';
import { atCeiling, RenewalHints, renewalHints } from './renewal-hints';
import { errorMessage } from '../common/error-message';

const NOTHING_RENEWED: LeaseRenewal = { renewed: 0, earliestExpiresAt: null, held: false };

export interface LeaseExtension {
  body: ExtendLeaseResponseDto;
  hints: RenewalHints;
}

@Injectable()
export class LeaseService {
  private readonly logger = new Logger(LeaseService.name);

  constructor(
    private readonly renewals: RenewalBatcher,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: MetricsService,
  ) {}

  /** Every id that renews nothing gets the same body, so a leaked id cannot be used to probe for existence. */
  async extend(tenantId: string, leaseId: string, seconds: number): Promise<LeaseExtension> {
    // A non-UUID cannot hold a lease; asking PostgreSQL would only fail the cast.
    const renewal = isUuid(leaseId)
      ? await this.renew(tenantId, leaseId.toLowerCase(), this.capped(seconds))
      : NOTHING_RENEWED;
    const expiry = renewal.earliestExpiresAt;
    const outcome = renewal.busy
      ? 'busy'
      : renewal.renewed === 0
        ? 'not_renewed'
        : atCeiling(renewal)
          ? 'at_ceiling'
          : 'renewed';
    this.metrics.renewals.inc({ outcome });
    if (renewal.slackSeconds !== undefined) this.metrics.renewalSlack.observe(Math.max(0, renewal.slackSeconds));
    return {
      body: {
        leaseId,
        success: renewal.renewed > 0,
        renewed: renewal.renewed,
        newExpiresAt: expiry,
        expiresAt: expiry,
        lease_expires_at: expiry,
      },
      hints: renewalHints(renewal),
    };
  }

  private async renew(tenantId: string, leaseId: string, seconds: number): Promise<LeaseRenewal> {
    try {
      return await this.renewals.renew({ tenantId, leaseId, seconds });
    } catch (error) {
      if (error instanceof RenewalFailedError) {
        const cause = errorMessage(error.cause);
        this.logger.warn(`${error.message} (${cause})`);
        throw new DatabaseFailureException(error.message, error);
      }
      throw error;
    }
  }

  private capped(seconds: number): number {
    const cap = this.config.leaseMaxExtendSeconds;
    return cap === undefined ? seconds : Math.min(seconds, cap);
  }
}
