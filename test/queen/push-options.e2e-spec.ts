import { sleep } from '../support/sleep';
import { newTenant } from '../support/test-app';
import { useTestBroker } from '../support/test-broker';
import { QueenClient } from './queen-client';

/** Queen's client tests pushDelayedMessage and pushWindowBuffer, with the pauses they take. */
describe("Queen's delayed and window-buffer push tests", () => {
  const broker = useTestBroker();

  it('pushDelayedMessage: a message of a queue with delayedProcessing 2 is not popped at once, and is 2.5 s later', async () => {
    const queen = new QueenClient(broker.app, newTenant());
    expect((await queen.create('test-queue-delayed', { delayedProcessing: 2 })).configured).toBe(true);
    expect(await queen.push('test-queue-delayed', { message: 'Hello, world!', aaa: '1' })).toBe(201);

    expect(await queen.pop('test-queue-delayed', 1)).toEqual([]);
    await sleep(2_500);

    expect(await queen.pop('test-queue-delayed', 1, { wait: true })).toHaveLength(1);
  });

  it('pushWindowBuffer: three messages of a queue with windowBuffer 2 come in one pop once the window passes', async () => {
    const queen = new QueenClient(broker.app, newTenant());
    expect((await queen.create('test-queue-window-buffer', { windowBuffer: 2 })).configured).toBe(true);
    expect(
      await queen.push(
        'test-queue-window-buffer',
        { message: 'Hello, world 1!' },
        { message: 'Hello, world 2!' },
        { message: 'Hello, world 3!' },
      ),
    ).toBe(201);

    expect(await queen.pop('test-queue-window-buffer', 1)).toEqual([]);
    await sleep(2_500);

    expect(await queen.pop('test-queue-window-buffer', 4)).toHaveLength(3);
  });
});
