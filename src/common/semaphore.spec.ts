import { KeyedPermits, KeyedSemaphore, Semaphore, TurnTimeoutError } from './semaphore';

/** A task that runs until the test lets it finish. */
function held(): { task: () => Promise<string>; started: () => boolean; finish: () => void } {
  let release!: () => void;
  let running = false;
  const done = new Promise<void>((resolve) => (release = resolve));
  return {
    task: async () => {
      running = true;
      await done;
      return 'done';
    },
    started: () => running,
    finish: () => release(),
  };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('Semaphore', () => {
  it('runs at most `permits` tasks at once, the others in arrival order', async () => {
    const semaphore = new Semaphore(2);
    const tasks = [held(), held(), held(), held()];
    const results = tasks.map((each) => semaphore.run(each.task));
    await flush();
    expect(tasks.map((each) => each.started())).toEqual([true, true, false, false]);

    tasks[1].finish();
    await flush();
    expect(tasks.map((each) => each.started())).toEqual([true, true, true, false]);
    tasks[0].finish();
    tasks[2].finish();
    await flush();
    tasks[3].finish();
    await expect(Promise.all(results)).resolves.toEqual(['done', 'done', 'done', 'done']);
    expect(semaphore.idle).toBe(true);
  });

  it('gives up on a turn that does not come in time, without running the task or losing a permit', async () => {
    const semaphore = new Semaphore(1);
    const first = held();
    const running = semaphore.run(first.task);
    const late = held();

    await expect(semaphore.run(late.task, 20)).rejects.toBeInstanceOf(TurnTimeoutError);
    expect(late.started()).toBe(false);
    first.finish();
    await running;
    await expect(semaphore.run(async () => 'next', 20)).resolves.toBe('next');
    expect(semaphore.idle).toBe(true);
  });
});

describe('KeyedSemaphore', () => {
  it('keeps one key waiting without holding another back', async () => {
    const semaphores = new KeyedSemaphore(1);
    const busy = held();
    const busyRun = semaphores.run('a', busy.task);
    const queued = held();
    const queuedRun = semaphores.run('a', queued.task);

    await expect(semaphores.run('b', async () => 'other key')).resolves.toBe('other key');
    expect(queued.started()).toBe(false);
    busy.finish();
    await busyRun;
    await flush();
    queued.finish();
    await expect(queuedRun).resolves.toBe('done');
  });
});

describe('KeyedPermits', () => {
  it('refuses a key past its permits at once, other keys unaffected, and gives the permit back once', () => {
    const permits = new KeyedPermits(2);
    const first = permits.tryAcquire('a');
    const second = permits.tryAcquire('a');
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(permits.tryAcquire('a')).toBeUndefined();
    expect(permits.tryAcquire('b')).toBeDefined();

    first!();
    first!();
    expect(permits.held('a')).toBe(1);
    const third = permits.tryAcquire('a');
    expect(third).toBeDefined();
    expect(permits.tryAcquire('a')).toBeUndefined();
    second!();
    third!();
    expect(permits.held('a')).toBe(0);
  });
});
