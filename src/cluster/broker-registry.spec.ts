import { loadConfig } from '../config/load-config';
import { DatabaseEngine } from '../database/database-engine';
import { Statement } from '../database/statement';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { BrokerRegistry } from './broker-registry';
import { BrokersRepository } from './brokers.repository';

/** A registry whose heartbeats answer what the test says, and whose timer the test moves. */
function registry(options: { embedded?: boolean; heartbeatMs?: string } = {}) {
  const answers: Array<number | Error> = [];
  const repository = new BrokersRepository();
  const brokers = {
    beat: jest.fn((...args: Parameters<BrokersRepository['beat']>) => repository.beat(...args)),
    leave: jest.fn((...args: Parameters<BrokersRepository['leave']>) => repository.leave(...args)),
  };
  // A heartbeat's statement answers the count the test says, through its own parse: the others, and itself.
  const transactions = {
    runOne: (_tenant: undefined, statement: Statement<unknown>) => {
      if (!statement.text.startsWith('WITH beat')) return Promise.resolve(statement.parse([]));
      const answer = answers.shift() ?? 1;
      return answer instanceof Error
        ? Promise.reject(answer)
        : Promise.resolve(statement.parse([{ others: answer - 1 }]));
    },
  } as unknown as TransactionRunner;
  let onDrain: () => void = () => undefined;
  const drain = { onDrain: (listener: () => void) => (onDrain = listener) } as unknown as DrainService;
  const engine = { isEmbedded: options.embedded ?? false } as DatabaseEngine;
  const config = loadConfig({ BROKER_HEARTBEAT_MS: options.heartbeatMs ?? '1000' });
  const subject = new BrokerRegistry(transactions, brokers, engine, drain, config);
  return { subject, brokers, answers, drain: () => onDrain() };
}

/** Runs the next heartbeat the timer would. */
async function nextHeartbeat(): Promise<void> {
  await jest.advanceTimersByTimeAsync(1_000);
}

describe('BrokerRegistry', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('counts 1 before its first heartbeat has answered', () => {
    expect(registry().subject.liveBrokers).toBe(1);
  });

  it('enforces the share of the brokers its heartbeat counted', async () => {
    const { subject, answers } = registry();
    answers.push(4);

    await subject.onApplicationBootstrap();

    expect(subject.liveBrokers).toBe(4);
    expect(subject.share(1000)).toBe(250);
    await subject.beforeApplicationShutdown();
  });

  it('keeps its last count while heartbeats fail, and takes the new one when they answer again', async () => {
    const { subject, answers } = registry();
    answers.push(3, new Error('connection terminated'), new Error('pool'), 2);

    await subject.onApplicationBootstrap();
    await nextHeartbeat();
    await nextHeartbeat();
    expect(subject.liveBrokers).toBe(3);

    await nextHeartbeat();
    expect(subject.liveBrokers).toBe(2);
    await subject.beforeApplicationShutdown();
  });

  it('counts 1 when its very first heartbeat fails', async () => {
    const { subject, answers } = registry();
    answers.push(new Error('connection refused'));

    await subject.onApplicationBootstrap();

    expect(subject.liveBrokers).toBe(1);
    await subject.beforeApplicationShutdown();
  });

  it('neither registers nor counts on the embedded database, or with BROKER_HEARTBEAT_MS=0', async () => {
    for (const options of [{ embedded: true }, { heartbeatMs: '0' }]) {
      const { subject, brokers } = registry(options);

      await subject.onApplicationBootstrap();
      await nextHeartbeat();
      await subject.beforeApplicationShutdown();

      expect(brokers.beat).not.toHaveBeenCalled();
      expect(brokers.leave).not.toHaveBeenCalled();
      expect(subject.share(500)).toBe(500);
    }
  });

  it('stops its heartbeats and deletes its row once, when draining begins and again at shutdown', async () => {
    const { subject, brokers, drain } = registry();
    await subject.onApplicationBootstrap();

    drain();
    await subject.beforeApplicationShutdown();
    await nextHeartbeat();
    await nextHeartbeat();

    expect(brokers.beat).toHaveBeenCalledTimes(1);
    expect(brokers.leave).toHaveBeenCalledTimes(1);
  });
});
