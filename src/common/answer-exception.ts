import { HttpException } from '@nestjs/common';

/**
 * A refusal whose answer carries more than `error`, as Queen's clients read it (success: false, a reason, the ids it
 * concerns); the filter sends the body whole. Only for fields the broker wrote, never text the caller sent.
 */
export class AnswerException extends HttpException {
  constructor(
    status: number,
    readonly body: { error: string } & Record<string, unknown>,
  ) {
    super(body, status);
  }
}
