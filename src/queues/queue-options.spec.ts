import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HttpException } from '@nestjs/common';
import { getMetadataArgsStorage } from 'typeorm';
import { declaredProperties } from '../common/dto-validation';
import { QueueEntity } from '../database/entities/queue.entity';
import { retentionOptionsInForce, retentionPolicy, StoredRetention } from '../retention/retention-policy';
import { ConfigureRequestPipe } from './configure-request.pipe';
import { QueueOptionsDto } from './dto/configure-request.dto';
import {
  listedOptions,
  optionsInForce,
  QUEUE_OPTIONS,
  RETENTION_OPTIONS,
  retentionSettingsOf,
  sentOptionsOf,
  StoredOptions,
} from './queue-options';

const DEFAULTS = { completedSeconds: 3_600, pendingSeconds: 1_209_600, deadLetterSeconds: 1_209_600 };

/** A queue configured with nothing: every column at its default, every retention option at the broker's. */
const FRESH: StoredOptions = Object.fromEntries(
  QUEUE_OPTIONS.map((option) => [option.key, option.retention ? null : option.default!]),
);

function retentionOf(stored: StoredOptions): StoredRetention {
  return Object.fromEntries(RETENTION_OPTIONS.map((key) => [key, stored[key]])) as unknown as StoredRetention;
}

const inForce = (stored: StoredOptions) => retentionOptionsInForce(retentionPolicy(retentionOf(stored), DEFAULTS));

function refusal(body: unknown): string {
  try {
    new ConfigureRequestPipe().transform(body);
  } catch (error) {
    return ((error as HttpException).getResponse() as { error: string }).error;
  }
  throw new Error('the body was accepted');
}

describe('QUEUE_OPTIONS', () => {
  it('has one column of the queues entity per option, with its default, nullable exactly for retention options', () => {
    const columns = getMetadataArgsStorage().columns.filter((column) => column.target === QueueEntity);
    for (const option of QUEUE_OPTIONS) {
      const column = columns.find((candidate) => candidate.options.name === option.column);
      expect({ option: option.key, found: column !== undefined }).toEqual({ option: option.key, found: true });
      expect({ option: option.key, type: column!.options.type }).toEqual({
        option: option.key,
        type: option.type,
      });
      if (option.retention) {
        expect({ option: option.key, nullable: column!.options.nullable }).toEqual({
          option: option.key,
          nullable: true,
        });
      } else {
        expect({ option: option.key, default: column!.options.default }).toEqual({
          option: option.key,
          default: option.default,
        });
      }
    }
  });

  it('declares each key and column once', () => {
    expect(new Set(QUEUE_OPTIONS.map((option) => option.key)).size).toBe(QUEUE_OPTIONS.length);
    expect(new Set(QUEUE_OPTIONS.map((option) => option.column)).size).toBe(QUEUE_OPTIONS.length);
  });

  it('makes the retention options exactly those the retention policy answers in force', () => {
    expect([...RETENTION_OPTIONS].sort()).toEqual(Object.keys(inForce(FRESH)).sort());
  });

  it('gives QueueOptionsDto one validated property per option, in the table order', () => {
    expect(declaredProperties(QueueOptionsDto)).toEqual(QUEUE_OPTIONS.map((option) => option.key));
  });
});

describe('docs/api.md', () => {
  /** The first two cells of each row of the Queue options table: the options it names and their default. */
  function documented(): Map<string, string> {
    const api = readFileSync(join(__dirname, '..', '..', 'docs', 'api.md'), 'utf8');
    const section = api.split('\n## Queue options')[1].split('\n## ')[0];
    const rows = new Map<string, string>();
    for (const line of section.split('\n').filter((row) => row.startsWith('| `'))) {
      const [names, fallback] = line.split(' | ');
      for (const [, name] of names.matchAll(/`(\w+)`/g)) rows.set(name, fallback);
    }
    return rows;
  }

  it('documents every option in the Queue options table, each with its default', () => {
    const rows = documented();
    for (const option of QUEUE_OPTIONS) {
      const fallback = rows.get(option.key);
      expect({ option: option.key, documented: fallback !== undefined }).toEqual({
        option: option.key,
        documented: true,
      });
      if (!option.retention && fallback !== undefined) {
        const shown = typeof option.default === 'boolean' ? `\`${option.default}\`` : String(option.default);
        expect({ option: option.key, default: fallback.split(' ')[0] }).toEqual({ option: option.key, default: shown });
      }
    }
  });
});

describe('configure options: the rules the table gives', () => {
  const integers = QUEUE_OPTIONS.filter((option) => option.type === 'integer');
  const booleans = QUEUE_OPTIONS.filter((option) => option.type === 'boolean');

  it.each(integers.map((option) => [option.key, option]))(
    'refuses %s just outside its range and takes both ends',
    (key, option) => {
      const range = `must be an integer between ${option.min} and ${option.max}`;
      expect(refusal({ queue: 'q', options: { [key]: option.min! - 1 } })).toBe(`options.${key} ${range}`);
      expect(refusal({ queue: 'q', options: { [key]: option.max! + 1 } })).toBe(`options.${key} ${range}`);
      expect(refusal({ queue: 'q', options: { [key]: 1.5 } })).toBe(`options.${key} ${range}`);
      for (const value of [option.min, option.max]) {
        expect(
          new ConfigureRequestPipe().transform({ queue: 'q', options: { [key]: value } }).settings.options,
        ).toEqual({
          [key]: value,
        });
      }
    },
  );

  it.each(booleans.map((option) => [option.key]))('refuses %s unless true or false', (key) => {
    expect(refusal({ queue: 'q', options: { [key]: 'yes' } })).toBe(`options.${key} must be true or false`);
  });

  it.each(QUEUE_OPTIONS.map((option) => [option.key, option.retention]))(
    'takes %s as null only when it is a retention option (%s)',
    (key, retention) => {
      if (retention) {
        const command = new ConfigureRequestPipe().transform({ queue: 'q', options: { [key]: null } });
        expect(command.settings.options).toEqual({ [key]: null });
        expect(command.settings.retention).toEqual({ [key]: null });
      } else {
        expect(refusal({ queue: 'q', options: { [key]: null } })).toMatch(new RegExp(`^options\\.${key} must be`));
      }
    },
  );

  it('reports the first problem in table order, whatever order the options were sent in', () => {
    expect(refusal({ queue: 'q', options: { maxSize: -1, ttl: 'x' } })).toBe(
      'options.ttl must be an integer between 0 and 2147483647',
    );
  });

  it('names an option it does not know, with the nearest declared one', () => {
    expect(refusal({ queue: 'q', options: { leaseTme: 3 } })).toBe(
      'options.leaseTme is not a supported option; did you mean "leaseTime"?',
    );
  });

  it('keeps the names in the order sent, and the retention ones apart', () => {
    const command = new ConfigureRequestPipe().transform({
      queue: 'q',
      namespace: '',
      options: { ttl: 5, leaseTime: 9, retentionEnabled: false },
    });

    expect(command.sent).toEqual(['ttl', 'leaseTime', 'retentionEnabled']);
    expect(command.settings).toEqual({
      options: { leaseTime: 9, retentionEnabled: false, ttl: 5 },
      retention: { retentionEnabled: false, ttl: 5 },
      namespace: '',
      task: undefined,
    });
  });

  it('leaves out what was not sent', () => {
    expect(sentOptionsOf({ leaseTime: 1, other: 2 })).toEqual({ leaseTime: 1 });
    expect(retentionSettingsOf({ leaseTime: 1, maxSize: null })).toEqual({ maxSize: null });
  });
});

describe('options in answers', () => {
  it('answers every option in force: a stored value, or for retention what the policy makes of it', () => {
    const stored = { ...FRESH, leaseTime: 30, retentionSeconds: null, retentionEnabled: false, ttl: 7 };

    expect(optionsInForce(stored, inForce(stored))).toEqual({
      leaseTime: 30,
      retryLimit: 3,
      deadLetterQueue: true,
      dlqAfterMaxRetries: false,
      retryDelay: 0,
      delayedProcessing: 0,
      windowBuffer: 0,
      priority: 0,
      completedRetentionSeconds: 3_600,
      retentionEnabled: false,
      retentionSeconds: 0,
      maxWaitTimeSeconds: 0,
      ttl: 7,
      maxSize: 0,
      dlqRetentionSeconds: 1_209_600,
      encryptionEnabled: false,
    });
  });

  it('lists a fresh queue with the three options always listed', () => {
    expect(listedOptions(FRESH, inForce(FRESH), {})).toEqual({ leaseTime: 60, retryLimit: 3, deadLetterQueue: true });
  });

  it('lists the others once they differ from their default, retention ones together in the policy order', () => {
    const stored = {
      ...FRESH,
      priority: -2,
      retryDelay: 10,
      encryptionEnabled: true,
      ttl: 5,
      maxSize: 3,
      maxWaitTimeSeconds: 9,
    };

    expect(Object.entries(listedOptions(stored, inForce(stored), {}))).toEqual([
      ['leaseTime', 60],
      ['retryLimit', 3],
      ['deadLetterQueue', true],
      ['retryDelay', 10],
      ['priority', -2],
      ['maxWaitTimeSeconds', 9],
      ['maxSize', 3],
      ['ttl', 5],
      ['encryptionEnabled', true],
    ]);
  });

  it('lists options stored before they were refused first, and the columns win over them', () => {
    const listed = listedOptions(FRESH, inForce(FRESH), { visibility: 30, leaseTime: 1, retryDelay: 5 });

    expect(Object.entries(listed)).toEqual([
      ['visibility', 30],
      ['leaseTime', 60],
      ['retryDelay', 5],
      ['retryLimit', 3],
      ['deadLetterQueue', true],
    ]);
  });
});
