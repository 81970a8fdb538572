import { Injectable, Logger } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { DatabaseProbe } from './database-probe';
import { ReadinessService } from './readiness.service';
import { errorMessage } from '../common/error-message';

export interface ProbeAnswer {
  status: number;
  body: unknown;
}

export const PROBE_PATHS: readonly string[] = ['/health', '/health/live', '/health/ready'];

const LIVE: ProbeAnswer = { status: 200, body: { status: 'ok', info: {}, error: {}, details: {} } };

/** Anyone may probe as often as they like: answered by `middleware` before routing, guards and interceptors. */
@Injectable()
export class ProbeService {
  private readonly logger = new Logger('Health');
  private readonly answers: Record<string, () => Promise<ProbeAnswer>> = {
    '/health': () => this.legacy(),
    '/health/live': () => Promise.resolve(LIVE),
    '/health/ready': () => this.readiness.report(),
  };

  constructor(
    private readonly probe: DatabaseProbe,
    private readonly readiness: ReadinessService,
  ) {}

  answer(path: string): Promise<ProbeAnswer> | undefined {
    return this.answers[path]?.();
  }

  readonly middleware = (request: Request, response: Response, next: NextFunction): void => {
    const answer = request.method === 'GET' || request.method === 'HEAD' ? this.answer(request.path) : undefined;
    if (!answer) return next();
    answer.then(({ status, body }) => void response.status(status).json(body), next);
  };

  private async legacy(): Promise<ProbeAnswer> {
    try {
      await this.probe.check();
      return { status: 200, body: { status: 'ok', database: 'up' } };
    } catch (error) {
      this.logger.warn(`health check failed: ${errorMessage(error)}`);
      return { status: 503, body: { error: 'database unavailable' } };
    }
  }
}
