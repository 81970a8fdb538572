/** The failover test on a Patroni stack (npm run test:ha); it starts and stops the stack itself. */
/** @type {import('jest').Config} */
module.exports = {
  rootDir: __dirname,
  testMatch: ['<rootDir>/test/ha/**/*.ha-spec.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.jest.json' }] },
  testEnvironment: 'node',
  maxWorkers: 1,
  testTimeout: 600000,
};
