import { ApiProperty, ApiPropertyOptional, ApiPropertyOptions } from '@nestjs/swagger';
import { isoTimestamp } from '../common/sql-timestamp';
import type { PayloadCipher } from '../encryption/payload-cipher';

const EXAMPLE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

/** A message as a pop hands it out and the message listing shows it; the payload is stored JSON text. */
export interface WireMessage {
  id: string;
  transactionId: string;
  traceId: string | null;
  dataJson: string;
  producerSub: string | null;
  createdAt: string;
  partitionId: string;
  partition: string;
  leaseId: string | null;
  consumerGroup: string;
  deliveryAttempt: number;
  leaseEpoch: number;
  /** Why the stored payload could not be decrypted; dataJson is then `null`. Undefined for every readable one. */
  payloadError: string | undefined;
}

/** The pair a message is unique by: a repeated push of it is a duplicate, and an ack names a message by it. */
export interface TransactionKey {
  partitionId: string;
  transactionId: string;
}

/** A TransactionKey as a producer names it, before its partition is looked up. */
export interface NamedTransactionKey {
  queue: string;
  partition: string;
  transactionId: string;
}

/** What a message row itself holds; the rest of a WireMessage comes from its partition and cursor. */
export type StoredMessage = Pick<
  WireMessage,
  'id' | 'transactionId' | 'traceId' | 'dataJson' | 'producerSub' | 'createdAt' | 'payloadError'
>;

/** The columns of a `messages` row `m` that a StoredMessage is read from (storedMessage). */
export const STORED_MESSAGE_COLUMNS = `m.id, m.transaction_id, m.trace_id, m.payload::text AS payload, m.key_id,
  m.producer_sub, ${isoTimestamp('m.created_at')} AS created_at`;

export interface StoredMessageRow {
  id: string;
  transaction_id: string;
  trace_id: string | null;
  payload: string;
  /** Set when the payload is stored encrypted. */
  key_id: string | null;
  producer_sub: string | null;
  created_at: string;
}

/** An encrypted payload is decrypted here; one that does not decrypt is answered as null with payloadError. */
export function storedMessage(row: StoredMessageRow, cipher: PayloadCipher): StoredMessage {
  const message: StoredMessage = {
    id: row.id,
    transactionId: row.transaction_id,
    traceId: row.trace_id,
    dataJson: row.payload,
    producerSub: row.producer_sub,
    createdAt: row.created_at,
    payloadError: undefined,
  };
  if (row.key_id !== null) {
    const opened = cipher.openOrReport(row.key_id, row.payload, row.id);
    message.dataJson = opened.json;
    message.payloadError = opened.error;
  }
  return message;
}

interface Field {
  key: string;
  write: (message: WireMessage) => string;
  property: ApiPropertyOptions;
}

const text = JSON.stringify;
/** PostgreSQL's UUIDs and timestamps need no escaping: JSON.stringify was most of the cost of writing a message. */
const plain = (value: string | null) => (value === null ? 'null' : `"${value}"`);

/** The one declaration of a message's JSON: key order, how each is written from a row, what Swagger shows. */
const MESSAGE_FIELDS: Field[] = [
  {
    key: 'id',
    write: (m) => plain(m.id),
    property: { type: String, description: 'Message id (UUIDv7)', example: EXAMPLE_ID },
  },
  {
    key: 'transactionId',
    write: (m) => text(m.transactionId),
    property: { type: String, example: 'order-42-created' },
  },
  {
    key: 'traceId',
    write: (m) => text(m.traceId),
    property: { type: String, nullable: true, example: 'trace-7f3a' },
  },
  {
    key: 'data',
    write: (m) => m.dataJson,
    property: {
      type: Object,
      description: 'The payload as it was pushed (its JSON text, minified), null included',
      example: { orderId: 42 },
    },
  },
  {
    key: 'producerSub',
    write: (m) => text(m.producerSub),
    property: { type: String, nullable: true, description: "The pushing token's subject; null when auth is off" },
  },
  {
    key: 'createdAt',
    write: (m) => plain(m.createdAt),
    property: { type: String, example: '2026-07-30T11:06:44.512873Z' },
  },
  { key: 'partitionId', write: (m) => plain(m.partitionId), property: { type: String, example: EXAMPLE_ID } },
  { key: 'partition', write: (m) => text(m.partition), property: { type: String, example: 'Default' } },
  {
    key: 'leaseId',
    write: (m) => plain(m.leaseId),
    property: {
      type: String,
      nullable: true,
      description: 'The lease of this pop; null with autoAck, and always null in listings (never shown to readers)',
      example: EXAMPLE_ID,
    },
  },
  { key: 'consumerGroup', write: (m) => text(m.consumerGroup), property: { type: String, example: '__QUEUE_MODE__' } },
  {
    key: 'deliveryAttempt',
    write: (m) => String(m.deliveryAttempt),
    property: {
      type: 'integer',
      description:
        '1 on first delivery to this group; one more each time the batch is redelivered after an expired lease ' +
        'or a nack (0 in a listing for a message not delivered yet)',
      example: 1,
    },
  },
  {
    key: 'leaseEpoch',
    write: (m) => String(m.leaseEpoch),
    property: {
      type: 'integer',
      description:
        "The fencing token of this message's claim: how many times its partition has been claimed by this group, " +
        'this claim included. It only grows, and a redelivery carries a higher one. Write it with what the ' +
        'handler stores elsewhere, and refuse a write carrying a lower epoch than the highest seen for the ' +
        'partition: a worker that stalled past its lease can then not overwrite the next holder. An ack may ' +
        'carry it (leaseEpoch).',
      example: 3,
    },
  },
];

const MEMBER_OPENINGS = MESSAGE_FIELDS.map((field, index) => `${index === 0 ? '{' : ','}"${field.key}":`);

/** The message as JSON text, with `extra` members (already JSON: `"status":"pending"`) appended. */
export function messageJson(message: WireMessage, extra = ''): string {
  let json = '';
  for (let index = 0; index < MESSAGE_FIELDS.length; index += 1) {
    json += MEMBER_OPENINGS[index] + MESSAGE_FIELDS[index].write(message);
  }
  if (message.payloadError !== undefined) json += `,"error":${text(message.payloadError)}`;
  return extra ? `${json},${extra}}` : `${json}}`;
}

/** Swagger's view of the same declaration. */
export class MessageDto {
  declare id: string;
  declare transactionId: string;
  declare traceId: string | null;
  declare data: unknown;
  declare producerSub: string | null;
  declare createdAt: string;
  declare partitionId: string;
  declare partition: string;
  declare leaseId: string | null;
  declare consumerGroup: string;
  declare deliveryAttempt: number;
  declare leaseEpoch: number;
  declare error?: string;
}
for (const field of MESSAGE_FIELDS) ApiProperty(field.property)(MessageDto.prototype, field.key);
ApiPropertyOptional({
  type: String,
  description:
    'Only on a message of an encrypted queue whose stored payload could not be decrypted (its key is not ' +
    'configured, or the stored text was altered): data is then null. Nack it or ack it with status dlq.',
  example: 'payload cannot be decrypted: it does not authenticate under key k1',
})(MessageDto.prototype, 'error');
