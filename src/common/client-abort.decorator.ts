import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { Response } from 'express';

/** Told once when the client hangs up: a function, or an object whose handleEvent runs (no closure needed). */
export type HangUpListener = (() => void) | { handleEvent(): void };

/** What a long poll needs of an AbortSignal; an AbortSignal is one. */
export interface HangUpSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: HangUpListener): void;
  removeEventListener(type: 'abort', listener: HangUpListener): void;
}

/**
 * An AbortController is an EventTarget with two Maps of its own, about 700 bytes a request; a parked poll holds one
 * for as long as it waits. This holds a flag and the one or two listeners a poll adds.
 */
export class ClientHangUp implements HangUpSignal {
  aborted = false;
  private listeners: HangUpListener[] | undefined;

  addEventListener(_type: 'abort', listener: HangUpListener): void {
    if (this.aborted) return;
    (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: HangUpListener): void {
    const at = this.listeners?.indexOf(listener) ?? -1;
    if (at >= 0) this.listeners!.splice(at, 1);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners ?? [];
    this.listeners = undefined;
    for (const listener of listeners) {
      if (typeof listener === 'function') listener();
      else listener.handleEvent();
    }
  }
}

/** A parked long poll stops waiting instead of claiming messages under a lease nobody will ever see. */
export const ClientAbortSignal = createParamDecorator((_data: unknown, context: ExecutionContext): HangUpSignal => {
  const response = context.switchToHttp().getResponse<Response>();
  const hangUp = new ClientHangUp();
  // 'close' comes once per response; once() would wrap the listener in two more objects for as long as the poll waits.
  response.on('close', () => {
    if (!response.writableFinished) hangUp.abort();
  });
  return hangUp;
});
