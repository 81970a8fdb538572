import { loadConfig } from '../config/load-config';
import { DatabaseServer } from '../database/database-server';
import { DrainService } from '../lifecycle/drain.service';
import { Notice, WakeupService, WakeupSubscription } from './wakeup.service';

const drain = { onDrain: () => undefined } as unknown as DrainService;

/** A process's wakeup service, never connected: notifications are handed to it by the test. */
function service(env: Record<string, string> = {}): WakeupService {
  return new WakeupService({} as DatabaseServer, loadConfig(env), drain);
}

const parked: WakeupSubscription[] = [];
afterEach(() => parked.splice(0).forEach((subscription) => subscription.settle('aborted')));

/** Subscribes and parks, as a poll that found nothing does. */
function park(
  wakeup: WakeupService,
  group: string,
  partition?: string,
  queue = 'jobs',
  tenant = 't1',
): WakeupSubscription {
  const subscription = wakeup.subscribe(tenant, queue, group, partition);
  void subscription.wait(60_000, new AbortController().signal);
  parked.push(subscription);
  return subscription;
}

const deliver = (wakeup: WakeupService, notices: Notice[]): void =>
  notices.forEach((notice) =>
    wakeup['onNotification']({ processId: 1, channel: notice.channel, payload: notice.payload }),
  );

const woken = (subscriptions: WakeupSubscription[]): boolean[] =>
  subscriptions.map((subscription) => subscription.settled);

describe('WakeupService', () => {
  it('wakes only the redelivered group, oldest first, one poll per message', () => {
    const wakeup = service();
    const polls = [park(wakeup, 'a'), park(wakeup, 'b'), park(wakeup, 'a'), park(wakeup, 'a')];

    wakeup.announceRedeliveries('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['p', 2]]) }]);

    expect(woken(polls)).toEqual([true, false, true, false]);
    expect(wakeup.parkedCount('t1', 'jobs', 'a')).toBe(1);
    expect(wakeup.parkedCount('t1', 'jobs', 'b')).toBe(1);
  });

  it("wakes a partition's poll only for that partition's messages", () => {
    const wakeup = service();
    const onX = park(wakeup, 'a', 'x');
    const onY = park(wakeup, 'a', 'y');

    wakeup.announceRedeliveries('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['y', 1]]) }]);

    expect(woken([onX, onY])).toEqual([false, true]);
  });

  it("does not wake another tenant's polls on a queue of the same name", () => {
    const wakeup = service();
    const other = park(wakeup, 'a', undefined, 'jobs', 't2');

    wakeup.announceRedeliveries('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['p', 5]]) }]);

    expect(other.settled).toBe(false);
  });

  it("hears another process's redelivery through its NOTIFY payload, for that group and partition only", () => {
    const sender = service();
    const receiver = service();
    const polls = [park(receiver, 'b'), park(receiver, 'a', 'x'), park(receiver, 'a', 'y'), park(receiver, 'a')];

    deliver(
      receiver,
      sender.redeliveryNotificationsFor('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['y', 1]]) }]),
    );

    expect(woken(polls)).toEqual([false, false, true, false]);
  });

  it('reads partition names containing tabs and counts above one', () => {
    const sender = service();
    const receiver = service();
    const polls = [park(receiver, 'a', 'odd\tname'), park(receiver, 'a'), park(receiver, 'a')];

    deliver(
      receiver,
      sender.redeliveryNotificationsFor('t1', [
        { queue: 'jobs', consumerGroup: 'a', partitions: new Map([['odd\tname', 3]]) },
      ]),
    );

    expect(woken(polls)).toEqual([true, true, true]);
  });

  it('ignores its own notifications: its waiters were woken directly', () => {
    const wakeup = service();
    const poll = park(wakeup, 'a');

    deliver(
      wakeup,
      wakeup.redeliveryNotificationsFor('t1', [{ queue: 'jobs', consumerGroup: 'a', partitions: new Map([['p', 1]]) }]),
    );

    expect(poll.settled).toBe(false);
  });

  it('a push wakes one poll per message in every group', () => {
    const sender = service();
    const receiver = service();
    const polls = [park(receiver, 'a'), park(receiver, 'a'), park(receiver, 'b')];

    deliver(receiver, sender.notificationsFor('t1', new Map([['jobs', new Map([['p', 1]])]])));

    expect(woken(polls)).toEqual([true, false, true]);
  });

  it('names the groups with parked polls until their last poll leaves', () => {
    const wakeup = service();
    const first = park(wakeup, 'a');
    const second = park(wakeup, 'a');
    expect(wakeup.isWaiting('t1', 'jobs', 'a')).toBe(true);
    expect(wakeup.waitingGroups()).toEqual([{ tenantId: 't1', queue: 'jobs', consumerGroup: 'a' }]);

    first.close();
    expect(wakeup.isWaiting('t1', 'jobs', 'a')).toBe(true);
    second.close();
    expect(wakeup.isWaiting('t1', 'jobs', 'a')).toBe(false);
    expect(wakeup.waitingGroups()).toEqual([]);
  });

  it("refuses to park a tenant's poll past POP_MAX_WAITING_PER_TENANT", () => {
    const wakeup = service({ POP_MAX_WAITING_PER_TENANT: '1' });
    expect(park(wakeup, 'a').refused).toBe(false);
    expect(wakeup.subscribe('t1', 'jobs', 'a', undefined).refused).toBe(true);
    expect(wakeup.subscribe('t2', 'jobs', 'a', undefined).refused).toBe(false);
  });
});
