import { ApiProperty, ApiPropertyOptions } from '@nestjs/swagger';
import { MessageDto, messageJson, WireMessage } from '../../message/message-shape';

const EXAMPLE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

interface Field<T> {
  key: string;
  write: (value: T) => string;
  property: ApiPropertyOptions;
}

const text = JSON.stringify;

/** Each member in order, as written from `fields`: the pop answer's writer and its Swagger schema share them. */
function writerOf<T>(fields: ReadonlyArray<Field<T>>): (value: T) => string {
  const openings = fields.map((field, index) => `${index === 0 ? '{' : ','}"${field.key}":`);
  return (value) => {
    let json = '';
    for (let index = 0; index < fields.length; index += 1) json += openings[index] + fields[index].write(value);
    return `${json}}`;
  };
}

function declareProperties<T>(dto: { prototype: object }, fields: ReadonlyArray<Field<T>>): void {
  for (const field of fields) ApiProperty(field.property)(dto.prototype, field.key);
}

/** One partition of a pop's claim: its first message stands for it. */
interface Claim {
  first: WireMessage;
  messages: number;
}

const CLAIM_FIELDS: ReadonlyArray<Field<Claim>> = [
  { key: 'partitionId', write: (c) => text(c.first.partitionId), property: { type: String, example: EXAMPLE_ID } },
  { key: 'partition', write: (c) => text(c.first.partition), property: { type: String, example: 'Default' } },
  {
    key: 'leaseEpoch',
    write: (c) => String(c.first.leaseEpoch),
    property: { type: 'integer', description: "This claim's fencing token (see the messages' leaseEpoch)", example: 3 },
  },
  {
    key: 'messages',
    write: (c) => String(c.messages),
    property: {
      type: 'integer',
      description: 'How many messages of this answer come from this partition',
      example: 10,
    },
  },
];

export class ClaimedPartitionDto {
  declare partitionId: string;
  declare partition: string;
  declare leaseEpoch: number;
  declare messages: number;
}
declareProperties(ClaimedPartitionDto, CLAIM_FIELDS);

const claimJson = writerOf(CLAIM_FIELDS);

/** A pop that claimed messages: all of one claim carry its lease (null with autoAck) and group. */
interface PopAnswer {
  queue: string;
  first: WireMessage;
  messages: readonly WireMessage[];
  claims: readonly Claim[];
}

/** The one declaration of the pop answer's envelope: member order, how each is written, what Swagger shows. */
const POP_FIELDS: ReadonlyArray<Field<PopAnswer>> = [
  { key: 'success', write: () => 'true', property: { type: Boolean, example: true } },
  { key: 'queue', write: (a) => text(a.queue), property: { type: String, example: 'orders' } },
  {
    key: 'partition',
    write: (a) => text(a.first.partition),
    property: {
      type: String,
      description: 'The first claimed partition (each message names its own)',
      example: 'Default',
    },
  },
  {
    key: 'partitionId',
    write: (a) => text(a.first.partitionId),
    property: {
      type: String,
      description: 'Id of the first claimed partition; acks name partitions by id',
      example: EXAMPLE_ID,
    },
  },
  {
    key: 'leaseId',
    write: (a) => text(a.first.leaseId),
    property: {
      type: String,
      nullable: true,
      description:
        'One lease (UUIDv7) for every partition this pop claimed: extend it, ack with it. null with autoAck.',
      example: EXAMPLE_ID,
    },
  },
  {
    key: 'consumerGroup',
    write: (a) => text(a.first.consumerGroup),
    property: { type: String, example: '__QUEUE_MODE__' },
  },
  {
    key: 'messages',
    // Each payload goes out as the JSON text PostgreSQL stored, never parsed and serialised.
    write: (a) => `[${a.messages.map((message) => messageJson(message)).join(',')}]`,
    property: { type: [MessageDto], description: 'In partition claim order, then offset order' },
  },
  {
    key: 'partitionsClaimed',
    write: (a) => String(a.claims.length),
    property: {
      type: 'integer',
      description: 'How many partitions this pop claimed (at most the partitions parameter)',
      example: 1,
    },
  },
  {
    key: 'claimedPartitions',
    write: (a) => `[${a.claims.map(claimJson).join(',')}]`,
    property: {
      type: [ClaimedPartitionDto],
      description: 'Each partition this pop claimed, in the order its messages come, with its fencing token',
    },
  },
];

export class PopResponseDto {
  declare success: boolean;
  declare queue: string;
  declare partition: string;
  declare partitionId: string;
  declare leaseId: string | null;
  declare consumerGroup: string;
  declare messages: MessageDto[];
  declare partitionsClaimed: number;
  declare claimedPartitions: ClaimedPartitionDto[];
}
declareProperties(PopResponseDto, POP_FIELDS);

const popJson = writerOf(POP_FIELDS);

/** The answer of a pop that claimed `claimed` (at least one message), in claim order. */
export function popAnswerJson(queue: string, claimed: readonly WireMessage[]): string {
  const claims = new Map<string, Claim>();
  for (const message of claimed) {
    const claim = claims.get(message.partitionId);
    if (claim) claim.messages += 1;
    else claims.set(message.partitionId, { first: message, messages: 1 });
  }
  return popJson({ queue, first: claimed[0], messages: claimed, claims: [...claims.values()] });
}
