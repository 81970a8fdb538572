import { ApiProperty, ApiPropertyOptions } from '@nestjs/swagger';

const EXAMPLE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

/** A trace as read, its data and its message's payload the stored JSON text. */
export interface StoredTrace {
  id: string;
  transactionId: string;
  partitionId: string;
  eventType: string;
  dataJson: string;
  consumerGroup: string;
  workerId: string;
  createdAt: string;
  queueName: string;
  partitionName: string;
  /** Read only for the answers that show it. */
  payloadJson?: string;
  traceNames: string[];
}

/** Swagger's view of a by-name entry (Queen's snake_case keys), declared from TRACE_FIELDS below. */
export class NamedTraceDto {
  declare id: string;
  declare transaction_id: string;
  declare partition_id: string;
  declare event_type: string;
  declare data: unknown;
  declare consumer_group: string;
  declare worker_id: string;
  declare created_at: string;
  declare queue_name: string;
  declare partition_name: string;
  declare message_payload: unknown;
  declare trace_names: string[];
}

/** A by-message entry: the message is known there, so neither it nor where it lies is repeated. */
export class MessageTraceDto {
  declare id: string;
  declare event_type: string;
  declare data: unknown;
  declare consumer_group: string;
  declare worker_id: string;
  declare created_at: string;
  declare trace_names: string[];
}

type TraceKey = keyof NamedTraceDto;

interface Field {
  write: (trace: StoredTrace) => string;
  property: ApiPropertyOptions;
}

const text = JSON.stringify;

/** The one declaration of a trace's JSON: Queen's key order, how each is written from a row, what Swagger shows. */
const TRACE_FIELDS: Record<TraceKey, Field> = {
  id: { write: (t) => text(t.id), property: { type: String, description: 'Trace id (UUIDv7)', example: EXAMPLE_ID } },
  transaction_id: { write: (t) => text(t.transactionId), property: { type: String, example: 'order-42-created' } },
  partition_id: { write: (t) => text(t.partitionId), property: { type: String, example: EXAMPLE_ID } },
  event_type: {
    write: (t) => text(t.eventType),
    property: { type: String, description: 'As recorded; info when none was given', example: 'processing' },
  },
  data: {
    write: (t) => t.dataJson,
    property: { type: Object, description: 'As recorded (its JSON text, minified)', example: { step: 'charged' } },
  },
  consumer_group: { write: (t) => text(t.consumerGroup), property: { type: String, example: '__QUEUE_MODE__' } },
  worker_id: {
    write: (t) => text(t.workerId),
    property: {
      type: String,
      description: "The id of the broker process that recorded it (its row in the database's brokers table)",
      example: '5b0d2f4e-8c1a-4e6b-9f3d-2a7c1e9b4d60',
    },
  },
  created_at: { write: (t) => text(t.createdAt), property: { type: String, example: '2026-07-30T11:06:44.512873Z' } },
  queue_name: { write: (t) => text(t.queueName), property: { type: String, example: 'orders' } },
  partition_name: { write: (t) => text(t.partitionName), property: { type: String, example: 'Default' } },
  message_payload: {
    write: (t) => t.payloadJson ?? 'null',
    property: { type: Object, description: "The traced message's payload, as pushed", example: { orderId: 42 } },
  },
  trace_names: {
    write: (t) => text(t.traceNames),
    property: { type: [String], description: 'The names it was recorded under', example: ['order-42'] },
  },
};

export const NAMED_TRACE_KEYS = Object.keys(TRACE_FIELDS) as TraceKey[];
export const MESSAGE_TRACE_KEYS: Array<keyof MessageTraceDto> = [
  'id',
  'event_type',
  'data',
  'consumer_group',
  'worker_id',
  'created_at',
  'trace_names',
];

/** The trace as JSON text with these keys, in this order; stored JSON goes out as stored. */
export function traceJson(trace: StoredTrace, keys: readonly TraceKey[]): string {
  return `{${keys.map((key) => `"${key}":${TRACE_FIELDS[key].write(trace)}`).join(',')}}`;
}

for (const key of NAMED_TRACE_KEYS) ApiProperty(TRACE_FIELDS[key].property)(NamedTraceDto.prototype, key);
for (const key of MESSAGE_TRACE_KEYS) ApiProperty(TRACE_FIELDS[key].property)(MessageTraceDto.prototype, key);
