/**
 * SQL over the queue row `queue`: whether messages that leave it unconsumed (retries used up, or evicted) are kept as
 * dead letters. Queen documents deadLetterQueue and dlqAfterMaxRetries as alternatives: either one keeps them.
 */
export const keepsDeadLetters = (queue: string): string =>
  `(${queue}.dead_letter_queue OR ${queue}.dlq_after_max_retries)`;
