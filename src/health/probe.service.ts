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

/**
 * The three probes' answers, given alike by the routes (HealthController,
 * for Swagger and the router), by `middleware` ahead of the router, and on
 * METRICS_PORT. Load balancers and orchestrators ask every few seconds, and
 * anyone may ask as often as they like: answered before routing, guards
 * and interceptors, a probe costs a fraction of a routed request.
 */
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

  /** The probe at `path`, or undefined when the path is not a probe's. */
  answer(path: string): Promise<ProbeAnswer> | undefined {
    return this.answers[path]?.();
  }

  readonly middleware = (request: Request, response: Response, next: NextFunction): void => {
    const answer = request.method === 'GET' || request.method === 'HEAD' ? this.answer(request.path) : undefined;
    if (!answer) return next();
    answer.then(({ status, body }) => void response.status(status).json(body), next);
  };

  /** `GET /health`: the readiness probe's round trip alone, in the shape existing clients know. */
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
