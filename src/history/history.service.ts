import { Injectable, NotFoundException } from '@nestjs/common';
import { TransactionRunner } from '../database/transaction-runner';
import {
  HISTORY_RANGES,
  HistoryRange,
  QueueHistoryDto,
  QueueHistoryPointDto,
  TenantHistoryDto,
} from './dto/history.dto';
import { HistoryRepository, HistorySeries } from './history.repository';

@Injectable()
export class HistoryService {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly history: HistoryRepository,
  ) {}

  async queue(tenantId: string, queue: string, range: HistoryRange): Promise<QueueHistoryDto> {
    const { seconds, stepSeconds } = HISTORY_RANGES[range];
    const series = await this.transactions.runOne(
      tenantId,
      this.history.queueSeries(tenantId, queue, seconds, stepSeconds),
    );
    if (!series.found) throw new NotFoundException({ error: 'queue not found' });
    return { queue, ...spanOf(range, series), points: pointsOf(range, series, true) };
  }

  async tenant(tenantId: string, range: HistoryRange): Promise<TenantHistoryDto> {
    const { seconds, stepSeconds } = HISTORY_RANGES[range];
    const series = await this.transactions.runOne(tenantId, this.history.tenantSeries(tenantId, seconds, stepSeconds));
    return {
      ...spanOf(range, series),
      points: pointsOf(range, series, false).map(({ lag: _lag, ...point }) => point),
    };
  }
}

function spanOf(range: HistoryRange, series: HistorySeries) {
  return { range, stepSeconds: HISTORY_RANGES[range].stepSeconds, from: series.from, to: series.to };
}

/** Every step of the range, quiet ones as zeros; a queue's depth carried from its last activity. */
function pointsOf(range: HistoryRange, series: HistorySeries, carryLag: boolean): QueueHistoryPointDto[] {
  const { seconds, stepSeconds } = HISTORY_RANGES[range];
  const byBucket = new Map(series.buckets.map((bucket) => [bucket.bucket, bucket]));
  const from = Date.parse(series.from);
  // `from` keeps the database's microseconds (always zero here: a minute's start), so the points share its format.
  const microseconds = series.from.slice(-4, -1);
  let lag = carryLag ? series.lagBefore : null;
  const points: QueueHistoryPointDto[] = [];
  for (let index = 0; index < seconds / stepSeconds; index++) {
    const bucket = byBucket.get(index);
    if (carryLag && bucket?.lag !== undefined && bucket.lag !== null) lag = bucket.lag;
    points.push({
      at: new Date(from + index * stepSeconds * 1000).toISOString().replace('Z', `${microseconds}Z`),
      pushed: bucket?.pushed ?? 0,
      popped: bucket?.popped ?? 0,
      acked: bucket?.acked ?? 0,
      deadLettered: bucket?.deadLettered ?? 0,
      maxWaitSeconds: bucket?.maxWaitMs === undefined || bucket.maxWaitMs === null ? null : bucket.maxWaitMs / 1000,
      lag,
    });
  }
  return points;
}
