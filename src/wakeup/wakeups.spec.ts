import { BrokerRegistry } from '../cluster/broker-registry';
import { ClientHangUp } from '../common/client-abort.decorator';
import { loadConfig } from '../config/load-config';
import { DatabaseServer } from '../database/database-server';
import { DrainService } from '../lifecycle/drain.service';
import { ParkedPolls, QueueWork, Redelivery, WakeupSubscription } from './parked-polls';
import { WakeupChannel } from './wakeup-channel';

const drain = { onDrain: () => undefined } as unknown as DrainService;
/** A broker alone in its deployment: its share of a limit is all of it. */
const alone = { share: (limit: number) => limit } as BrokerRegistry;

interface Process {
  polls: ParkedPolls;
  channel: WakeupChannel;
}

/** A broker process's polls and channel, never connected: notices are handed over by the test. */
function process(env: Record<string, string> = {}): Process {
  const config = loadConfig(env);
  const polls = new ParkedPolls(config, drain, alone);
  return { polls, channel: new WakeupChannel({} as DatabaseServer, polls, config) };
}

const parked: WakeupSubscription[] = [];
afterEach(() => parked.splice(0).forEach((subscription) => subscription.settle('aborted')));

/** Subscribes and parks, as a poll that found nothing does. */
function park(
  polls: ParkedPolls,
  group: string,
  partition?: string,
  queue = 'jobs',
  tenant = 't1',
): WakeupSubscription {
  const subscription = polls.subscribe(polls.begin(tenant), queue, group, partition);
  void subscription.wait(60_000, new AbortController().signal);
  parked.push(subscription);
  return subscription;
}

/** What `sender` tells for a write, as the receiver hears it. */
function tell(sender: Process, receiver: Process, pushed: Map<string, QueueWork>, redelivered: Redelivery[]): void {
  for (const notice of sender.channel.notices('t1', pushed, redelivered)) {
    receiver.channel['onNotification']({ processId: 1, channel: notice.channel, payload: notice.payload });
  }
}

const woken = (subscriptions: WakeupSubscription[]): boolean[] =>
  subscriptions.map((subscription) => subscription.settled);

describe('ParkedPolls', () => {
  it('wakes only the redelivered group, oldest first, one poll per message', () => {
    const { polls } = process();
    const waiting = [park(polls, 'a'), park(polls, 'b'), park(polls, 'a'), park(polls, 'a')];

    polls.redelivered('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['p', 2]]) }]);

    expect(woken(waiting)).toEqual([true, false, true, false]);
    expect(polls.parkedCount('t1', 'jobs', 'a')).toBe(1);
    expect(polls.parkedCount('t1', 'jobs', 'b')).toBe(1);
  });

  it("wakes a partition's poll only for that partition's messages", () => {
    const { polls } = process();
    const onX = park(polls, 'a', 'x');
    const onY = park(polls, 'a', 'y');

    polls.redelivered('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['y', 1]]) }]);

    expect(woken([onX, onY])).toEqual([false, true]);
  });

  it("does not wake another tenant's polls on a queue of the same name", () => {
    const { polls } = process();
    const other = park(polls, 'a', undefined, 'jobs', 't2');

    polls.redelivered('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['p', 5]]) }]);

    expect(other.settled).toBe(false);
  });

  it('a push wakes one poll per message in every group', () => {
    const { polls } = process();
    const waiting = [park(polls, 'a'), park(polls, 'a'), park(polls, 'b')];

    polls.pushed('t1', new Map([['jobs', new Map([['p', 1]])]]));

    expect(woken(waiting)).toEqual([true, false, true]);
  });

  it('names the groups with parked polls until their last poll leaves', () => {
    const { polls } = process();
    const first = park(polls, 'a');
    const second = park(polls, 'a');
    expect(polls.isWaiting('t1', 'jobs', 'a')).toBe(true);
    expect(polls.waitingGroups()).toEqual([{ tenantId: 't1', queue: 'jobs', consumerGroup: 'a' }]);

    first.close();
    expect(polls.isWaiting('t1', 'jobs', 'a')).toBe(true);
    second.close();
    expect(polls.isWaiting('t1', 'jobs', 'a')).toBe(false);
    expect(polls.waitingGroups()).toEqual([]);
  });

  it("refuses a tenant's poll past POP_MAX_WAITING_PER_TENANT, counting a poll once however many queues it waits on", () => {
    const { polls } = process({ POP_MAX_WAITING_PER_TENANT: '2' });
    const first = polls.begin('t1');
    for (const queue of ['a', 'b', 'c']) polls.subscribe(first, queue, 'g', undefined);
    const second = polls.begin('t1');
    expect([first.refused, second.refused]).toEqual([false, false]);
    expect(polls.begin('t1').refused).toBe(true);
    expect(polls.begin('t2').refused).toBe(false);
    expect(polls.total).toBe(3);

    first.end();
    first.end();
    expect(polls.total).toBe(2);
    expect(polls.begin('t1').refused).toBe(false);
  });
});

describe('ParkedPolls, one deadline heap and lists per partition', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const subscribe = (polls: ParkedPolls, partition?: string, group = 'a'): WakeupSubscription =>
    polls.subscribe(polls.begin('t1'), 'jobs', group, partition);

  it('times each wait out at its own deadline, soonest first, and forgets it', async () => {
    const { polls } = process();
    const signal = new ClientHangUp();
    const waiting = [300, 100, 200].map(() => subscribe(polls));
    const outcomes = waiting.map((subscription, index) => subscription.wait([300, 100, 200][index], signal));
    expect(polls.scheduled).toBe(3);

    jest.advanceTimersByTime(150);
    expect(woken(waiting)).toEqual([false, true, false]);
    expect(polls.scheduled).toBe(2);
    jest.advanceTimersByTime(100);
    expect(woken(waiting)).toEqual([false, true, true]);
    jest.advanceTimersByTime(100);

    expect(await Promise.all(outcomes)).toEqual(['timeout', 'timeout', 'timeout']);
    expect(polls.scheduled).toBe(0);
    expect(polls.isWaiting('t1', 'jobs', 'a')).toBe(false);
  });

  it('an earlier deadline parked later still times out first', async () => {
    const { polls } = process();
    const signal = new ClientHangUp();
    const late = subscribe(polls);
    const lateOutcome = late.wait(10_000, signal);
    const early = subscribe(polls);
    const earlyOutcome = early.wait(50, signal);

    jest.advanceTimersByTime(60);

    expect(await earlyOutcome).toBe('timeout');
    expect(late.settled).toBe(false);
    late.settle('aborted');
    expect(await lateOutcome).toBe('aborted');
    expect(polls.scheduled).toBe(0);
  });

  it('frees a poll whose client hung up: out of its list and the heap at once, uncounted once it ends', async () => {
    const { polls } = process();
    const hangUp = new ClientHangUp();
    const poll = polls.begin('t1');
    const subscription = polls.subscribe(poll, 'jobs', 'a', 'p1');
    const outcome = subscription.wait(60_000, hangUp);
    expect([polls.scheduled, polls.parkedCount('t1', 'jobs', 'a'), polls.total]).toEqual([1, 1, 1]);

    hangUp.abort();

    expect(await outcome).toBe('aborted');
    expect([polls.scheduled, polls.parkedCount('t1', 'jobs', 'a')]).toEqual([0, 0]);
    expect(polls.waitingGroups()).toEqual([]);
    subscription.close();
    poll.end();
    expect(polls.total).toBe(0);
  });

  it('wakes each poll once: later messages go to the next poll, and a woken poll stays woken', async () => {
    const { polls } = process();
    const hangUp = new ClientHangUp();
    const [first, second] = [subscribe(polls), subscribe(polls)];
    const outcomes = [first.wait(60_000, hangUp), second.wait(60_000, hangUp)];
    const one = (): void =>
      polls.redelivered('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['p', 1]]) }]);

    one();
    expect(woken([first, second])).toEqual([true, false]);
    one();
    expect(woken([first, second])).toEqual([true, true]);
    one();
    hangUp.abort();
    jest.advanceTimersByTime(60_000);

    expect(await Promise.all(outcomes)).toEqual(['woken', 'woken']);
    expect(polls.isWaiting('t1', 'jobs', 'a')).toBe(false);
    expect(polls.scheduled).toBe(0);
  });

  it("finds a partition's polls among thousands without waking the others", () => {
    const { polls } = process({ POP_MAX_WAITING_PER_TENANT: '10000' });
    const onPartitions = Array.from({ length: 2_000 }, (_, index) => subscribe(polls, `p${index}`));
    const anyPartition = subscribe(polls);

    polls.pushed('t1', new Map([['jobs', new Map([['p1500', 1]])]]));
    expect(onPartitions.filter((subscription) => subscription.settled)).toEqual([onPartitions[1500]]);
    expect(anyPartition.settled).toBe(false);

    polls.pushed('t1', new Map([['jobs', new Map([['elsewhere', 1]])]]));
    expect(anyPartition.settled).toBe(true);
    expect(onPartitions.filter((subscription) => subscription.settled)).toHaveLength(1);
    expect(polls.parkedCount('t1', 'jobs', 'a')).toBe(0);

    // A wakeup that names no partitions wakes as many as it says, any partition's first.
    polls.wake('t1', 'jobs', undefined, 3);
    expect(onPartitions.filter((subscription) => subscription.settled)).toHaveLength(4);
    for (const subscription of onPartitions) subscription.settle('aborted');
    expect(polls.waitingGroups()).toEqual([]);
  });

  it('answers every poll closing when the broker drains, and times none out afterwards', async () => {
    const { polls } = process();
    const signal = new ClientHangUp();
    const waiting = [subscribe(polls, 'p'), subscribe(polls), subscribe(polls, undefined, 'b')];
    const outcomes = waiting.map((subscription) => subscription.wait(1_000, signal));

    polls.closeAll();

    expect(await Promise.all(outcomes)).toEqual(['closing', 'closing', 'closing']);
    expect([polls.scheduled, polls.total, polls.waitingGroups().length]).toEqual([0, 0, 0]);
    expect(subscribe(polls).settled).toBe(true);
  });
});

describe('WakeupChannel', () => {
  it("hears another process's redelivery through its NOTIFY payload, for that group and partition only", async () => {
    const sender = process();
    const receiver = process();
    const waiting = [park(receiver.polls, 'b'), park(receiver.polls, 'a', 'x'), park(receiver.polls, 'a', 'y')];

    tell(sender, receiver, new Map(), [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['y', 1]]) }]);

    expect(woken(waiting)).toEqual([false, false, true]);
  });

  it('reads partition names containing tabs and counts above one', async () => {
    const sender = process();
    const receiver = process();
    const waiting = [park(receiver.polls, 'a', 'odd\tname'), park(receiver.polls, 'a'), park(receiver.polls, 'a')];

    tell(sender, receiver, new Map(), [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['odd\tname', 3]]) }]);

    expect(woken(waiting)).toEqual([true, true, true]);
  });

  it('ignores its own notices: its waiters were woken directly', async () => {
    const only = process();
    const poll = park(only.polls, 'a');

    tell(only, only, new Map([['jobs', new Map([['p', 1]])]]), []);

    expect(poll.settled).toBe(false);
  });

  it("wakes a push's polls in another process, one per message in every group", async () => {
    const sender = process();
    const receiver = process();
    const waiting = [park(receiver.polls, 'a'), park(receiver.polls, 'a'), park(receiver.polls, 'b')];

    tell(sender, receiver, new Map([['jobs', new Map([['p', 1]])]]), []);

    expect(woken(waiting)).toEqual([true, false, true]);
  });
});
