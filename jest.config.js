/** Unit specs sit beside the code; e2e specs boot the real AppModule against one database started in globalSetup. */
const tsJest = ['ts-jest', { tsconfig: '<rootDir>/tsconfig.jest.json' }];

/** @type {import('jest').Config} */
module.exports = {
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  maxWorkers: 2,
  // Jest reads the timeout from the top level; the e2e project's own setting is not applied. A guard against a
  // hang, not a measure of speed: a busy machine takes several times as long as a quiet one.
  testTimeout: 120000,
  projects: [
    {
      displayName: 'unit',
      rootDir: __dirname,
      testMatch: ['<rootDir>/src/**/*.spec.ts'],
      transform: { '^.+\\.ts$': tsJest },
      testEnvironment: 'node',
    },
    {
      displayName: 'e2e',
      rootDir: __dirname,
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      transform: { '^.+\\.ts$': tsJest },
      testEnvironment: 'node',
    },
    {
      // Faults between the broker and PostgreSQL, and signals to broker
      // processes, each checked with a ledger; real PostgreSQL only.
      displayName: 'faults',
      rootDir: __dirname,
      testMatch: ['<rootDir>/test/faults/**/*.fault-spec.ts'],
      transform: { '^.+\\.ts$': tsJest },
      testEnvironment: 'node',
    },
    {
      // The web console in Debian's Chromium (test/browser/console.browser-spec.ts).
      displayName: 'browser',
      rootDir: __dirname,
      testMatch: ['<rootDir>/test/browser/**/*.browser-spec.ts'],
      transform: { '^.+\\.ts$': tsJest },
      testEnvironment: 'node',
    },
    {
      // The same tests as client/jest.config.js, compiled like the rest of the
      // repo so the shared global setup can be transformed by any project.
      displayName: 'client',
      rootDir: __dirname,
      testMatch: ['<rootDir>/client/test/**/*.spec.ts'],
      transform: { '^.+\\.ts$': tsJest },
      testEnvironment: 'node',
    },
  ],
};
