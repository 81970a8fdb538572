import { DeadLetterDto } from './dto/dead-letter.dto';

/** A dead letter as read, its payload the stored JSON text. */
export type StoredDeadLetter = Omit<DeadLetterDto, 'data'> & { dataJson: string };

/** A DeadLetterDto's JSON, keys in the same order, the payload written as stored rather than parsed and serialised. */
export function deadLetterJson({ dataJson, ...letter }: StoredDeadLetter): string {
  const { id, messageId, transactionId, traceId, ...rest } = letter;
  const head = JSON.stringify({ id, messageId, transactionId, traceId });
  return `${head.slice(0, -1)},"data":${dataJson},${JSON.stringify(rest).slice(1)}`;
}
