import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { inSequence } from './in-sequence';

const request = {} as Request;
const response = {} as Response;

function run(handlers: RequestHandler[]): Promise<unknown> {
  return new Promise((resolve) => {
    inSequence(handlers)(request, response, ((error?: unknown) => resolve(error ?? 'next')) as NextFunction);
  });
}

describe('inSequence', () => {
  it('runs each handler in order, then leaves to next', async () => {
    const order: number[] = [];
    const handlers = [1, 2, 3].map((n): RequestHandler => (_req, _res, next) => {
      order.push(n);
      next();
    });
    await expect(run(handlers)).resolves.toBe('next');
    expect(order).toEqual([1, 2, 3]);
  });

  it('stops at a handler that answers without calling next', () => {
    const later = jest.fn();
    const next = jest.fn();
    inSequence([() => undefined, later])(request, response, next);
    expect(later).not.toHaveBeenCalled();
    expect(next).not.toHaveBeenCalled();
  });

  it.each([
    ['passed to next', (_req: Request, _res: Response, next: NextFunction) => next(new Error('boom'))],
    [
      'thrown',
      () => {
        throw new Error('boom');
      },
    ],
    ['rejected', () => Promise.reject(new Error('boom'))],
  ])('hands an error %s to next and skips the rest', async (_how, failing) => {
    const later = jest.fn();
    const error = await run([failing as RequestHandler, later]);
    expect((error as Error).message).toBe('boom');
    expect(later).not.toHaveBeenCalled();
  });
});
