const path = require('node:path');

/** @type {import('jest').Config} */
module.exports = {
  displayName: 'client',
  // The repo root, so the root jest config can list this file under `projects` unchanged.
  rootDir: path.join(__dirname, '..'),
  testMatch: ['<rootDir>/client/test/**/*.spec.ts'],
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: path.join(__dirname, 'tsconfig.json') }],
  },
  moduleFileExtensions: ['ts', 'js', 'json'],
};
