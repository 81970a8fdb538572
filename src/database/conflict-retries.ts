import { Injectable, Logger, Optional } from '@nestjs/common';
import { conflictName, conflictOf } from '../common/database-errors';
import { MetricsService } from '../metrics/metrics.service';
import { CLIENT_MARGIN_MS, monotonicNow } from './deadline';

/** Attempts of one unit of work that PostgreSQL rolls back as a deadlock or a serialization failure. */
export const CONFLICT_ATTEMPTS = 3;
/** The first pause, doubled for each attempt after, each drawn from half to one and a half of it. */
const BACKOFF_MS = 20;
/** Less than this left of the bound, a retry would be cut short: the failure is answered instead. */
const MIN_ATTEMPT_MS = CLIENT_MARGIN_MS;

/**
 * Whether and when to run again a whole unit of work that PostgreSQL gave up (never a statement inside one: its
 * transaction is gone), within the bound the first attempt had. Each retry is counted and logged.
 */
@Injectable()
export class ConflictRetries {
  private readonly logger = new Logger('Database');

  constructor(@Optional() private readonly metrics?: MetricsService) {}

  /** Milliseconds to wait before attempt `attempt + 1`, or undefined when `error` is to be answered as it is. */
  after(error: unknown, attempt: number, deadline: number): number | undefined {
    const conflict = conflictOf(error);
    if (!conflict || attempt >= CONFLICT_ATTEMPTS) return undefined;
    const pauseMs = Math.round(BACKOFF_MS * 2 ** (attempt - 1) * (0.5 + Math.random()));
    if (deadline - monotonicNow() - pauseMs < MIN_ATTEMPT_MS) return undefined;
    this.metrics?.databaseRetries.inc({ sqlstate: conflict });
    this.logger.warn(
      `A ${conflictName(conflict)} (${conflict}) rolled back a unit of work; attempt ${attempt + 1} of ` +
        `${CONFLICT_ATTEMPTS} in ${pauseMs} ms`,
    );
    return pauseMs;
  }
}
