import { LaterAnswer, whenAnswered } from './later-answer';

describe('LaterAnswer', () => {
  it('tells its listener the answer given after it listened, once', () => {
    const later = new LaterAnswer<string>();
    const answered = jest.fn();
    const failed = jest.fn();
    later.listen({ answered, failed });
    expect(answered).not.toHaveBeenCalled();

    later.answer('first');
    later.answer('second');
    later.fail(new Error('late'));

    expect(answered.mock.calls).toEqual([['first']]);
    expect(failed).not.toHaveBeenCalled();
  });

  it('keeps an answer given before anyone listened, and tells it at once', () => {
    const later = new LaterAnswer<string>();
    later.fail(new Error('gone'));
    const failed = jest.fn();

    later.listen({ answered: jest.fn(), failed });

    expect(failed.mock.calls).toEqual([[new Error('gone')]]);
  });

  it('has one listener', () => {
    const later = new LaterAnswer<string>();
    later.listen({ answered: jest.fn(), failed: jest.fn() });
    expect(() => later.listen({ answered: jest.fn(), failed: jest.fn() })).toThrow('one listener');
  });

  it('is not a thenable: awaiting it gives the object, not its answer', async () => {
    const later = new LaterAnswer<string>();
    later.answer('now');
    expect('then' in later).toBe(false);
    await expect(Promise.resolve(later)).resolves.toBe(later);
    await expect(whenAnswered(later)).resolves.toBe('now');
    await expect(whenAnswered('plain')).resolves.toBe('plain');
  });

  it('rejects its promise with the failure', async () => {
    const later = new LaterAnswer<string>();
    const promise = later.promise();
    later.fail(new Error('database timeout'));
    await expect(promise).rejects.toThrow('database timeout');
  });
});
