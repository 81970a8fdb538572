import type { Response } from 'supertest';
import { waitForValue } from './wait';

/** Asks again until the answer has `status` (probes that change with the database), and returns that answer. */
export function answerWithin(ask: () => PromiseLike<Response>, status: number, timeoutMs = 15_000): Promise<Response> {
  return waitForValue(
    async () => {
      const response = await ask();
      return response.status === status ? response : undefined;
    },
    `an answer ${status}`,
    timeoutMs,
  );
}
