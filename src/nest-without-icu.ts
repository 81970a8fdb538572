/*
 * @nestjs/common builds an Intl.DateTimeFormat as it loads, reading ICU's locale data in: about 6.5 MB resident for
 * good, though this broker never formats a date. main.ts imports this module first.
 */

type DateTimeFormatArguments = ConstructorParameters<typeof Intl.DateTimeFormat>;

const Real = Intl.DateTimeFormat;

function deferred(...args: DateTimeFormatArguments): Intl.DateTimeFormat {
  let formatter: Intl.DateTimeFormat | undefined;
  const real = (): Intl.DateTimeFormat => (formatter ??= new Real(...args));
  return new Proxy({} as Intl.DateTimeFormat, {
    get: (_target, key) => {
      const value: unknown = Reflect.get(real(), key);
      return typeof value === 'function' ? (value as (...inputs: unknown[]) => unknown).bind(real()) : value;
    },
  });
}

Intl.DateTimeFormat = deferred as unknown as typeof Intl.DateTimeFormat;
try {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  require('@nestjs/common');
} finally {
  Intl.DateTimeFormat = Real;
}
