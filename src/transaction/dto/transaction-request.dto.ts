import { ApiExtraModels, ApiProperty, ApiPropertyOptional, getSchemaPath } from '@nestjs/swagger';
import { AckRequestDto } from '../../ack/dto/ack-request.dto';
import { MAX_PUSH_ITEMS, PushItemDto } from '../../push/dto/push-request.dto';
import { AcceptsKey, IsArrayOf } from '../../common/dto-validation';

export const MAX_REQUIRED_LEASES = 1_000;

export class TransactionPushOperationDto {
  @ApiProperty({ enum: ['push'] })
  @AcceptsKey()
  type: 'push';

  @ApiProperty({
    type: [PushItemDto],
    description: `Push items, as on /push; a transaction holds at most ${MAX_PUSH_ITEMS} of them in all`,
  })
  @IsArrayOf(() => PushItemDto, { max: MAX_PUSH_ITEMS, noun: 'messages' })
  items: PushItemDto[];
}

export class TransactionAckOperationDto extends AckRequestDto {
  @ApiProperty({ enum: ['ack'] })
  @AcceptsKey()
  type: 'ack';
}

@ApiExtraModels(TransactionPushOperationDto, TransactionAckOperationDto)
export class TransactionRequestDto {
  @ApiProperty({
    type: 'array',
    minItems: 1,
    items: {
      oneOf: [
        { $ref: getSchemaPath(TransactionPushOperationDto) },
        { $ref: getSchemaPath(TransactionAckOperationDto) },
      ],
      discriminator: { propertyName: 'type' },
    },
    description:
      'Run in request order in one database transaction: all of them apply, or none. At most ' +
      'TRANSACTION_MAX_OPERATIONS (20000 by default), each ack and each push item counting one',
    example: [
      {
        type: 'ack',
        transactionId: 'order-42-created',
        partitionId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90',
        leaseEpoch: 3,
      },
      { type: 'push', items: [{ queue: 'invoices', transactionId: 'invoice-for-order-42', payload: { orderId: 42 } }] },
    ],
  })
  @AcceptsKey()
  operations: unknown[];

  @ApiPropertyOptional({
    type: [String],
    maxItems: MAX_REQUIRED_LEASES,
    description:
      'Leases the caller must still hold, live, at commit by the database clock (or that an ack of this ' +
      'transaction released); an ack without its own leaseId is checked against the one of these holding its ' +
      'partition, if any',
    example: ['0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91'],
  })
  @AcceptsKey()
  requiredLeases?: string[];
}
