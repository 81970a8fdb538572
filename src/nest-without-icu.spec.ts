describe('loading Nest without ICU date data', () => {
  const Real = Intl.DateTimeFormat;
  afterEach(() => {
    Intl.DateTimeFormat = Real;
    jest.restoreAllMocks();
  });

  it('builds no date formatter while @nestjs/common loads, and the console logger builds one when it first logs', () => {
    let built = 0;
    Intl.DateTimeFormat = function (...args: ConstructorParameters<typeof Intl.DateTimeFormat>) {
      built += 1;
      return new Real(...args);
    } as unknown as typeof Intl.DateTimeFormat;
    const written = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);

    jest.isolateModules(() => {
      // A module registry of its own, so that @nestjs/common loads again, through the module under test.
      /* eslint-disable @typescript-eslint/no-require-imports */
      require('./nest-without-icu');
      expect(built).toBe(0);
      const { ConsoleLogger } = require('@nestjs/common') as typeof import('@nestjs/common');
      /* eslint-enable @typescript-eslint/no-require-imports */
      new ConsoleLogger('Test', { colors: false }).log('hello');
    });

    expect(built).toBe(1);
    expect(String(written.mock.calls[0][0])).toMatch(/\d{2}\/\d{2}\/\d{4},? .*LOG \[Test\] hello/);
  });
});
