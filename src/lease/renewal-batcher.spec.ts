import { PoolUnavailableError } from '../common/database-errors';
import { AppConfig } from '../config/app-config';
import { loadConfig } from '../config/load-config';
import { LeaseRenewal, LeaseRepository, RenewalFailedError, RenewalRequest } from './lease.repository';
import { RenewalBatcher } from './renewal-batcher';

/** A repository whose statements finish only when the test says so. */
class ControlledRepository {
  readonly calls: Array<{
    requests: readonly RenewalRequest[];
    deadline: number;
    finish: (error?: Error) => void;
  }> = [];

  renew(requests: readonly RenewalRequest[], deadline: number): Promise<LeaseRenewal[]> {
    return new Promise((resolve, reject) => {
      this.calls.push({
        requests,
        deadline,
        finish: (error) =>
          error
            ? reject(error)
            : resolve(requests.map((request) => ({ renewed: request.seconds, earliestExpiresAt: request.leaseId }))),
      });
    });
  }
}

const request = (leaseId: string, seconds = 60, tenantId = 't'): RenewalRequest => ({ tenantId, leaseId, seconds });
const flush = () => new Promise((resolve) => setImmediate(resolve));

function batcher(env: Record<string, string>): { batcher: RenewalBatcher; repository: ControlledRepository } {
  const repository = new ControlledRepository();
  const config: AppConfig = loadConfig(env);
  return { batcher: new RenewalBatcher(repository as unknown as LeaseRepository, config), repository };
}

describe('RenewalBatcher', () => {
  it('runs a lone renewal at once, as a statement of its own', async () => {
    const { batcher: subject, repository } = batcher({});

    const answer = subject.renew(request('a', 30));
    await flush();

    expect(repository.calls).toHaveLength(1);
    expect(repository.calls[0].requests).toEqual([{ ...request('a', 30), expectedRows: 1 }]);
    repository.calls[0].finish();
    await expect(answer).resolves.toEqual({ renewed: 30, earliestExpiresAt: 'a' });
  });

  it('tells each statement how many rows a lease renewed last time, unless that answer left busy rows behind', async () => {
    const answers: LeaseRenewal[] = [
      { renewed: 3, earliestExpiresAt: 'x' },
      { renewed: 1, earliestExpiresAt: 'x', busy: true },
      { renewed: 3, earliestExpiresAt: 'x' },
    ];
    const sent: RenewalRequest[] = [];
    const repository = {
      renew: (requests: readonly RenewalRequest[]) => {
        sent.push(...requests);
        return Promise.resolve([answers[sent.length - 1]]);
      },
    };
    const subject = new RenewalBatcher(repository as unknown as LeaseRepository, loadConfig({}));

    for (const expected of [1, 3, 3]) {
      await subject.renew(request('a'));
      expect(sent.at(-1)?.expectedRows).toBe(expected);
    }
  });

  it('groups renewals that arrive while every slot is busy into one statement, each with its own answer', async () => {
    const { batcher: subject, repository } = batcher({ LEASE_RENEWAL_CONCURRENCY: '1' });

    const first = subject.renew(request('a', 1));
    const queued = [subject.renew(request('b', 2)), subject.renew(request('c', 3)), subject.renew(request('d', 4))];
    await flush();
    expect(repository.calls).toHaveLength(1);

    repository.calls[0].finish();
    await expect(first).resolves.toEqual({ renewed: 1, earliestExpiresAt: 'a' });
    await flush();
    expect(repository.calls).toHaveLength(2);
    expect(repository.calls[1].requests.map((pending) => pending.leaseId)).toEqual(['b', 'c', 'd']);

    repository.calls[1].finish();
    await expect(Promise.all(queued)).resolves.toEqual([
      { renewed: 2, earliestExpiresAt: 'b' },
      { renewed: 3, earliestExpiresAt: 'c' },
      { renewed: 4, earliestExpiresAt: 'd' },
    ]);
  });

  it('keeps a lease out of a second statement while a first one renews it, so the other slot serves other leases', async () => {
    const { batcher: subject, repository } = batcher({ LEASE_RENEWAL_CONCURRENCY: '2' });

    const first = subject.renew(request('hot', 1, 'a'));
    await flush();
    const again = [subject.renew(request('hot', 2, 'a')), subject.renew(request('hot', 3, 'a'))];
    const other = subject.renew(request('cold', 4, 'b'));
    await flush();

    expect(repository.calls.map((call) => call.requests.map((pending) => pending.leaseId))).toEqual([
      ['hot'],
      ['cold'],
    ]);
    repository.calls[1].finish();
    await expect(other).resolves.toEqual({ renewed: 4, earliestExpiresAt: 'cold' });
    await flush();
    expect(repository.calls).toHaveLength(2);

    repository.calls[0].finish();
    await expect(first).resolves.toEqual({ renewed: 1, earliestExpiresAt: 'hot' });
    await flush();
    // Both waiting renewals of the lease go in the next statement together.
    expect(repository.calls[2].requests.map((pending) => pending.seconds)).toEqual([2, 3]);
    repository.calls[2].finish();
    await expect(Promise.all(again)).resolves.toEqual([
      { renewed: 2, earliestExpiresAt: 'hot' },
      { renewed: 3, earliestExpiresAt: 'hot' },
    ]);
  });

  it('never puts more than LEASE_RENEWAL_BATCH_SIZE renewals in one statement', async () => {
    const { batcher: subject, repository } = batcher({ LEASE_RENEWAL_CONCURRENCY: '1', LEASE_RENEWAL_BATCH_SIZE: '2' });

    const answers = ['a', 'b', 'c', 'd', 'e'].map((id) => subject.renew(request(id)));
    await flush();
    repository.calls[0].finish();
    await flush();
    repository.calls[1].finish();
    await flush();
    repository.calls[2].finish();
    await Promise.all(answers);

    expect(repository.calls.map((call) => call.requests.length)).toEqual([1, 2, 2]);
  });

  it('keeps no more statements in flight than the pool has connections', async () => {
    const { batcher: subject, repository } = batcher({ LEASE_RENEWAL_CONCURRENCY: '8', DB_POOL_SIZE: '2' });

    const answers = ['a', 'b', 'c'].map((id) => subject.renew(request(id)));
    await flush();

    expect(repository.calls).toHaveLength(2);
    repository.calls.forEach((call) => call.finish());
    await flush();
    repository.calls[2].finish();
    await Promise.all(answers);
  });

  it('fails only the renewals of the statement that failed, and keeps serving', async () => {
    const { batcher: subject, repository } = batcher({ LEASE_RENEWAL_CONCURRENCY: '1' });

    const doomed = subject.renew(request('a'));
    const later = subject.renew(request('b', 7));
    await flush();
    repository.calls[0].finish(new Error('boom'));

    await expect(doomed).rejects.toThrow('boom');
    await flush();
    repository.calls[1].finish();
    await expect(later).resolves.toEqual({ renewed: 7, earliestExpiresAt: 'b' });
  });

  describe('deadlines', () => {
    beforeEach(() => jest.useFakeTimers({ now: 0, doNotFake: ['setImmediate'] }));
    afterEach(() => jest.useRealTimers());

    // DB_ACQUIRE_TIMEOUT_MS + DB_STATEMENT_TIMEOUT_MS + the 1 s client margin.
    const env = { LEASE_RENEWAL_CONCURRENCY: '1', DB_ACQUIRE_TIMEOUT_MS: '1000', DB_STATEMENT_TIMEOUT_MS: '2000' };
    const boundMs = 4000;

    it('gives a statement the deadline of the earliest request in it, counted from its arrival', async () => {
      const { batcher: subject, repository } = batcher(env);
      const arrivedAt = performance.now();

      const first = subject.renew(request('a'));
      await flush();

      expect(repository.calls[0].deadline).toBe(arrivedAt + boundMs);
      repository.calls[0].finish();
      await first;
    });

    it('answers pool, without running them, for renewals whose bound ran out while they waited for a slot', async () => {
      const { batcher: subject, repository } = batcher(env);

      const stuck = subject.renew(request('a'));
      await flush();
      jest.advanceTimersByTime(1000);
      const late = subject.renew(request('b'));
      jest.advanceTimersByTime(boundMs);
      const fresh = subject.renew(request('c'));
      repository.calls[0].finish(new PoolUnavailableError(new Error('stalled')));
      await expect(stuck).rejects.toBeInstanceOf(PoolUnavailableError);

      await expect(late).rejects.toBeInstanceOf(PoolUnavailableError);
      await flush();
      expect(repository.calls).toHaveLength(2);
      expect(repository.calls[1].requests.map((pending) => pending.leaseId)).toEqual(['c']);
      repository.calls[1].finish();
      await expect(fresh).resolves.toEqual({ renewed: 60, earliestExpiresAt: 'c' });
    });
  });

  describe('between tenants', () => {
    it('takes waiting renewals round-robin by tenant, so a tenant with many waiting does not crowd out another', async () => {
      const { batcher: subject, repository } = batcher({
        LEASE_RENEWAL_CONCURRENCY: '1',
        LEASE_RENEWAL_BATCH_SIZE: '4',
      });

      const answers = [
        subject.renew(request('busy', 1, 'A')),
        ...['a1', 'a2', 'a3', 'a4', 'a5', 'a6'].map((id) => subject.renew(request(id, 1, 'A'))),
        subject.renew(request('b1', 1, 'B')),
      ];
      await flush();
      repository.calls[0].finish();
      await flush();

      expect(repository.calls[1].requests.map((pending) => pending.leaseId)).toEqual(['a1', 'b1', 'a2', 'a3']);
      repository.calls[1].finish();
      await flush();
      repository.calls[2].finish();
      await Promise.all(answers);
    });

    /** Renews each lease once alone so the batcher learns its size (the fake answers `seconds` rows renewed). */
    async function learn(
      subject: RenewalBatcher,
      repository: ControlledRepository,
      leases: RenewalRequest[],
    ): Promise<void> {
      for (const lease of leases) {
        const answer = subject.renew(lease);
        await flush();
        repository.calls[repository.calls.length - 1].finish();
        await answer;
        await flush();
      }
    }

    it('keeps a group within LEASE_RENEWAL_BATCH_ROWS, counting each lease at the size it renewed last', async () => {
      const { batcher: subject, repository } = batcher({
        LEASE_RENEWAL_CONCURRENCY: '1',
        LEASE_RENEWAL_BATCH_ROWS: '25',
      });
      const leases = ['l1', 'l2', 'l3'].map((id) => request(id, 10, 'A'));
      await learn(subject, repository, leases);

      const busy = subject.renew(request('busy', 1, 'C'));
      await flush();
      const queued = leases.map((lease) => subject.renew(lease));
      await flush();
      repository.calls[3].finish();
      await busy;
      await flush();

      expect(repository.calls[4].requests.map((pending) => pending.leaseId)).toEqual(['l1', 'l2']);
      repository.calls[4].finish();
      await flush();
      expect(repository.calls[5].requests.map((pending) => pending.leaseId)).toEqual(['l3']);
      repository.calls[5].finish();
      await Promise.all(queued);
    });

    it('renews big leases in statements of their own that never take the last free slot', async () => {
      const { batcher: subject, repository } = batcher({ LEASE_RENEWAL_CONCURRENCY: '2' });
      const big = [request('big-1', 500, 'A'), request('big-2', 500, 'A')];
      await learn(subject, repository, big);

      const bigAnswers = big.map((lease) => subject.renew(lease));
      const smallAnswer = subject.renew(request('small', 1, 'B'));
      await flush();

      // big-1 found both slots free; big-2 may not take the last one, small may.
      expect(repository.calls.slice(2).map((call) => call.requests.map((pending) => pending.leaseId))).toEqual([
        ['big-1'],
        ['small'],
      ]);
      repository.calls[3].finish();
      await smallAnswer;
      await flush();
      const later = subject.renew(request('big-1', 500, 'A'));
      await flush();
      expect(repository.calls).toHaveLength(4);

      repository.calls[2].finish();
      await flush();
      expect(repository.calls[4].requests.map((pending) => pending.leaseId)).toEqual(['big-2', 'big-1']);
      repository.calls[4].finish();
      await Promise.all([...bigAnswers, later]);
    });

    it('answers with the failure only the renewals that fail on their own: a failed group is retried by tenant, then one by one', async () => {
      const { batcher: subject, repository } = batcher({ LEASE_RENEWAL_CONCURRENCY: '1' });
      const timeout = () => new RenewalFailedError('statement timeout', undefined);

      const busy = subject.renew(request('busy', 1, 'C'));
      // Caught at once: it rejects while the test is still driving the others.
      const culprit = subject.renew(request('huge', 1, 'A')).catch((error: unknown) => error);
      const neighbour = subject.renew(request('own', 1, 'A'));
      const victim = subject.renew(request('small', 1, 'B'));
      await flush();
      repository.calls[0].finish();
      await busy;
      await flush();
      expect(repository.calls[1].requests.map((pending) => pending.leaseId)).toEqual(['huge', 'small', 'own']);

      repository.calls[1].finish(timeout());
      await flush();
      expect(repository.calls[2].requests.map((pending) => pending.leaseId)).toEqual(['huge', 'own']);
      repository.calls[2].finish(timeout());
      await flush();
      expect(repository.calls[3].requests.map((pending) => pending.leaseId)).toEqual(['huge']);
      repository.calls[3].finish(timeout());
      await flush();
      expect(repository.calls[4].requests.map((pending) => pending.leaseId)).toEqual(['own']);
      repository.calls[4].finish();
      await flush();
      expect(repository.calls[5].requests.map((pending) => pending.leaseId)).toEqual(['small']);
      repository.calls[5].finish();

      expect(await culprit).toBeInstanceOf(RenewalFailedError);
      await expect(neighbour).resolves.toMatchObject({ renewed: 1 });
      await expect(victim).resolves.toMatchObject({ renewed: 1 });
    });
  });
});
