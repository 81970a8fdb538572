import { ClientHangUp } from './client-abort.decorator';

describe('ClientHangUp', () => {
  it('tells each listener still added once, functions and handleEvent objects alike', () => {
    const hangUp = new ClientHangUp();
    const heard: string[] = [];
    const first = (): number => heard.push('first');
    const removed = (): number => heard.push('removed');
    const object = { handleEvent: (): number => heard.push('object') };
    hangUp.addEventListener('abort', first);
    hangUp.addEventListener('abort', removed);
    hangUp.addEventListener('abort', object);
    hangUp.removeEventListener('abort', removed);

    hangUp.abort();
    hangUp.abort();
    hangUp.addEventListener('abort', () => heard.push('late'));

    expect(hangUp.aborted).toBe(true);
    expect(heard).toEqual(['first', 'object']);
  });

  it('forgets a lone listener removed before the hang-up', () => {
    const hangUp = new ClientHangUp();
    const listener = jest.fn();
    hangUp.addEventListener('abort', listener);
    hangUp.removeEventListener('abort', listener);

    hangUp.abort();

    expect(listener).not.toHaveBeenCalled();
  });
});
