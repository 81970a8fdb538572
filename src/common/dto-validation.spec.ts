import { BadRequestException, HttpException, PayloadTooLargeException } from '@nestjs/common';
import { AckBatchRequestDto, AckRequestDto } from '../ack/dto/ack-request.dto';
import { PopQueryDto } from '../pop/dto/pop-query.dto';
import { PushItemDto, PushRequestDto } from '../push/dto/push-request.dto';
import { ConfigureRequestDto } from '../queues/dto/configure-request.dto';
import { withValidationLimits } from './contract-validators';
import {
  AcceptsKey,
  classValidatorMessage,
  compileDtoCheck,
  firstMessage,
  IgnoresKeys,
  instantiate,
  IsObjectOf,
  unknownKeysProblem,
  validateBody,
  validateQuery,
} from './dto-validation';
import { IsName } from './contract-validators';

const LIMITS = { messageMaxBytes: 64 };
const UUID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

function thrown(run: () => unknown): HttpException {
  try {
    run();
  } catch (error) {
    if (error instanceof HttpException) return error;
    throw error;
  }
  throw new Error('nothing was thrown');
}

describe('DTO validation', () => {
  describe('the compiled check of an item DTO gives what class-validator gives', () => {
    const pushItems: Record<string, unknown>[] = [
      { queue: 'q', payload: 1 },
      { queue: 'q', partition: 'p', payload: null, transactionId: 't', traceId: null },
      {},
      { payload: 1 },
      { queue: 7 },
      { queue: '', payload: 1 },
      { queue: 'q', partition: {}, payload: 1 },
      { queue: 'q' },
      { queue: 'q', payload: { a: '\u0000' }, transactionId: 5 },
      { queue: 'q', payload: 'x'.repeat(100) },
      { queue: 'q', payload: 1, transactionId: 't\ud800' },
      { queue: 'q', payload: 1, traceId: ['t'] },
    ];
    const acks: Record<string, unknown>[] = [
      { transactionId: 't', partitionId: UUID },
      {
        transactionId: 't',
        partitionId: UUID.toUpperCase(),
        status: 'nack',
        consumerGroup: null,
        leaseId: UUID,
        leaseEpoch: 3,
        error: 'e',
      },
      {},
      { transactionId: 1 },
      { transactionId: 't', partitionId: 'x' },
      { transactionId: 't', partitionId: UUID, status: 1 },
      { transactionId: 't', partitionId: UUID, consumerGroup: '' },
      { transactionId: 't', partitionId: UUID, leaseId: 'x' },
      { transactionId: 't', partitionId: UUID, leaseEpoch: 0 },
      { transactionId: 't', partitionId: UUID, leaseEpoch: null, error: {} },
    ];

    // Request bodies: the first failing property is the one class-validator names, whatever fails after it.
    const pushBodies: Record<string, unknown>[] = [
      {},
      { items: [] },
      { items: pushItems.slice(0, 2) },
      { items: pushItems },
      { items: 'x' },
    ];
    const ackBatches: Record<string, unknown>[] = [
      { acknowledgments: acks.slice(0, 2) },
      { acknowledgments: acks },
      { acknowledgments: acks.slice(0, 2), consumerGroup: 'g' },
      { consumerGroup: 7, acknowledgments: 'x' },
      { consumerGroup: '', acknowledgments: acks.slice(3) },
      {},
    ];
    const configureBodies: Record<string, unknown>[] = [
      { queue: 'q' },
      { queue: 'q', options: { leaseTime: 0 } },
      { queue: '', options: [] },
      { queue: 'q', namespace: 5, options: { deadLetterQueue: 'yes' } },
    ];

    it.each([
      ['PushItemDto', PushItemDto, pushItems],
      ['AckRequestDto', AckRequestDto, acks],
      ['PushRequestDto', PushRequestDto, pushBodies],
      ['AckBatchRequestDto', AckBatchRequestDto, ackBatches],
      ['ConfigureRequestDto', ConfigureRequestDto, configureBodies],
    ] as const)('for %s', (_name, dto, corpus) => {
      const type: new () => object = dto;
      const check = compileDtoCheck(type);
      let refused = 0;
      for (const plain of corpus) {
        const instance = instantiate(type, plain);
        const expected = withValidationLimits(LIMITS, () => classValidatorMessage(instance));
        if (expected !== undefined) refused += 1;
        expect(withValidationLimits(LIMITS, () => check(plain))).toBe(expected);
        expect(withValidationLimits(LIMITS, () => firstMessage(instance))).toBe(expected);
      }
      expect(refused).toBeGreaterThan(1);
    });

    it('refuses a DTO with rules it cannot run directly, and leaves it to class-validator', () => {
      expect(() => compileDtoCheck(PopQueryDto)).toThrow(/only contract rules can be compiled/);
      const query = Object.assign(new PopQueryDto(), { subscriptionMode: 'sometimes' });
      expect(firstMessage(query)).toBe(classValidatorMessage(query));
      expect(firstMessage(query)).toMatch(/^subscriptionMode must be one of/);
    });
  });

  describe('validateBody', () => {
    it.each([
      [undefined, 'request body must be a JSON object'],
      [[], 'request body must be a JSON object'],
      [{}, 'items must be an array'],
      [{ items: null }, 'items must be an array'],
      [{ items: [42] }, 'items[0] must be a JSON object'],
      [{ items: [[{}]] }, 'items[0] must be a JSON object'],
      [
        { items: [{ queue: 'q', payload: 1 }, { queue: 'q', payload: 2 }, { queue: 'q' }] },
        'items[2].payload is required (null is allowed)',
      ],
      [
        {
          items: [
            { queue: 'q', payload: 1 },
            { queue: 'q\n', payload: 1 },
          ],
        },
        'items[1].queue must not contain control characters',
      ],
      [{ items: Array(10_001).fill({ queue: 'q', payload: 1 }) }, 'items may hold at most 10000 messages'],
    ])('answers 400 to the push body %#', (body, message) => {
      const error = thrown(() => validateBody(PushRequestDto, body, LIMITS));

      expect(error).toBeInstanceOf(BadRequestException);
      expect(error.getResponse()).toEqual({ error: message });
    });

    it('answers 413 naming the item to a payload above the limit, before a later item is judged', () => {
      const error = thrown(() =>
        validateBody(PushRequestDto, { items: [{ queue: 'q', payload: 'x'.repeat(100) }, { queue: '' }] }, LIMITS),
      );

      expect(error).toBeInstanceOf(PayloadTooLargeException);
      expect(error.getResponse()).toEqual({ error: 'items[0].payload is larger than 64 bytes (102)' });
    });

    it('names the acknowledgment of an ack batch, after the batch consumerGroup', () => {
      expect(
        thrown(() => validateBody(AckBatchRequestDto, { consumerGroup: 7, acknowledgments: 'x' })).getResponse(),
      ).toEqual({
        error: 'consumerGroup must be a string',
      });
      expect(
        thrown(() =>
          validateBody(AckBatchRequestDto, { acknowledgments: [{ transactionId: 't', partitionId: 'bad' }] }),
        ).getResponse(),
      ).toEqual({ error: 'acknowledgments[0].partitionId must be a UUID' });
    });

    it.each([
      [{ queue: 'q', options: [] }, 'options must be a JSON object'],
      [{ queue: 'q', options: { note: 'a\u0000', leaseTime: 0 } }, 'options.note is not a supported option'],
      [{ queue: 'q', options: { leaseTime: null } }, 'options.leaseTime must be an integer between 1 and 2147483647'],
      [{ queue: 'q', options: { deadLetterQueue: 'yes' } }, 'options.deadLetterQueue must be true or false'],
    ])('answers 400 to the configure body %#', (body, message) => {
      expect(thrown(() => validateBody(ConfigureRequestDto, body)).getResponse()).toEqual({ error: message });
    });
  });

  describe('validateQuery', () => {
    it('gives the defaults for an empty pop query', () => {
      expect({ ...validateQuery(PopQueryDto, {}) }).toEqual({
        batch: 200,
        partitions: 1,
        wait: false,
        timeout: 30_000,
        consumerGroup: '__QUEUE_MODE__',
        subscriptionMode: 'all',
        autoAck: false,
      });
    });

    it('converts and normalises what a pop query sends', () => {
      const query = validateQuery(PopQueryDto, {
        batch: '10',
        wait: '1',
        autoAck: 'false',
        subscriptionMode: 'New-Only',
        subscriptionFrom: '2026-07-30T11:06:44',
      });

      expect(query).toMatchObject({
        batch: 10,
        wait: true,
        autoAck: false,
        subscriptionMode: 'new',
        subscriptionFrom: '2026-07-30T11:06:44Z',
      });
    });

    it('does not judge subscriptionMode when subscriptionFrom is now', () => {
      expect(validateQuery(PopQueryDto, { subscriptionFrom: 'NOW', subscriptionMode: 'sometimes' })).toMatchObject({
        subscriptionFrom: 'NOW',
      });
    });

    it.each([
      [{ batch: ['1', '2'] }, 'batch must be an integer between 1 and 10000'],
      [{ timeout: '-1' }, 'timeout must be an integer between 0 and 600000'],
      [{ consumerGroup: ['a', 'b'] }, 'consumerGroup must be given once'],
      [{ subscriptionMode: 'sometimes' }, 'subscriptionMode must be one of all, from_beginning, new, new-only, now'],
      [
        { subscriptionFrom: ['now', 'now'] },
        'subscriptionFrom must be now or an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z',
      ],
      [{ autoAck: 'maybe', batch: '0' }, 'batch must be an integer between 1 and 10000'],
    ])('answers 400 to the pop query %p', (query, message) => {
      const error = thrown(() => validateQuery(PopQueryDto, query));

      expect(error).toBeInstanceOf(BadRequestException);
      expect(error.getResponse()).toEqual({ error: message });
    });
  });

  describe('unknown keys', () => {
    class Inner {
      @IsName()
      name: string;
    }

    @IgnoresKeys('legacy')
    class Outer {
      @AcceptsKey()
      kind: string;

      @IsObjectOf(() => Inner)
      inner?: Inner;
    }

    @IgnoresKeys('older')
    class Later extends Outer {}

    it('accepts declared keys, keys taken without a rule and ignored ones, along the class chain', () => {
      expect(unknownKeysProblem(Later, { kind: 'x', inner: { name: 'n' }, legacy: 1, older: 2 })).toBeUndefined();
      expect(validateBody(Later, { kind: 'x', legacy: 1 })).toEqual(Object.assign(new Later(), { kind: 'x' }));
    });

    it('names an unknown key with the declared one it is likely meant to be, never an ignored one', () => {
      expect(unknownKeysProblem(Outer, { knid: 'x' })).toBe('unknown key "knid"; did you mean "kind"?');
      expect(unknownKeysProblem(Outer, { legac: 1 })).toBe('unknown key "legac"');
      expect(thrown(() => validateBody(Outer, { kind: 'x', inner: { nmae: 'n' } })).getResponse()).toEqual({
        error: 'inner: unknown key "nmae"; did you mean "name"?',
      });
    });

    it('names three keys at most, each cut to 40 characters, however many and however long', () => {
      const long = 'y'.repeat(100_000);
      expect(unknownKeysProblem(Outer, { a: 1, [long]: 2, knd: 3, d: 4, e: 5 })).toBe(
        `unknown keys "a", "${'y'.repeat(40)}...", "knd" (did you mean "kind"?) and 2 more`,
      );
    });

    it('refuses unknown keys before judging the known ones, at every depth of a push and an ack batch', () => {
      expect(thrown(() => validateBody(PushRequestDto, { item: [] }, LIMITS)).getResponse()).toEqual({
        error: 'unknown key "item"; did you mean "items"?',
      });
      expect(
        thrown(() =>
          validateBody(
            PushRequestDto,
            {
              items: [
                { queue: 'q', payload: 1 },
                { queue: '', Payload: 1 },
              ],
            },
            LIMITS,
          ),
        ).getResponse(),
      ).toEqual({ error: 'items[1]: unknown key "Payload"; did you mean "payload"?' });
      expect(
        thrown(() =>
          validateBody(AckBatchRequestDto, { acknowledgments: [{ transactionId: 't', partitionId: UUID, lease: 1 }] }),
        ).getResponse(),
      ).toEqual({ error: 'acknowledgments[0]: unknown key "lease"; did you mean "leaseId"?' });
    });

    it('calls what a query string holds a query parameter', () => {
      expect(thrown(() => validateQuery(PopQueryDto, { bacth: '1' })).getResponse()).toEqual({
        error: 'unknown query parameter "bacth"; did you mean "batch"?',
      });
    });
  });
});
