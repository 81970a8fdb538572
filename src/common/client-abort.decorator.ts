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
  /** One listener is the common case: an array only from a second one (a grown array costs 150 bytes). */
  private listeners: HangUpListener | HangUpListener[] | undefined = undefined;

  addEventListener(_type: 'abort', listener: HangUpListener): void {
    if (this.aborted) return;
    const listeners = this.listeners;
    if (listeners === undefined) this.listeners = listener;
    else if (Array.isArray(listeners)) listeners.push(listener);
    else this.listeners = [listeners, listener];
  }

  removeEventListener(_type: 'abort', listener: HangUpListener): void {
    const listeners = this.listeners;
    if (listeners === listener) this.listeners = undefined;
    else if (Array.isArray(listeners)) {
      const at = listeners.indexOf(listener);
      if (at >= 0) listeners.splice(at, 1);
    }
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = undefined;
    for (const listener of Array.isArray(listeners) ? listeners : listeners ? [listeners] : []) {
      if (typeof listener === 'function') listener();
      else listener.handleEvent();
    }
  }
}

const HANG_UP = Symbol('leasehold:hang-up');

/** One listener for every response (this = the response): no closure per parked poll. */
function hungUp(this: Response & { [HANG_UP]?: ClientHangUp }): void {
  if (!this.writableFinished) this[HANG_UP]?.abort();
}

/** A parked long poll stops waiting instead of claiming messages under a lease nobody will ever see. */
export const ClientAbortSignal = createParamDecorator((_data: unknown, context: ExecutionContext): HangUpSignal => {
  const response = context.switchToHttp().getResponse<Response & { [HANG_UP]?: ClientHangUp }>();
  const hangUp = new ClientHangUp();
  response[HANG_UP] = hangUp;
  // 'close' comes once per response; once() would wrap the listener in two more objects for as long as the poll waits.
  response.on('close', hungUp);
  return hangUp;
});
