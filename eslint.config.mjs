// @ts-check
import eslint from '@eslint/js';
import eslintPluginPrettierRecommended from 'eslint-plugin-prettier/recommended';
import globals from 'globals';
import tseslint from 'typescript-eslint';

// The rules Nest's application template ships, applied to the broker, its tests, the benchmark and the client.
export default tseslint.config(
  {
    ignores: ['eslint.config.mjs', 'dist/**', 'dist-bench/**', 'client/dist/**', 'coverage/**', '**/*.js'],
  },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  eslintPluginPrettierRecommended,
  {
    languageOptions: {
      globals: { ...globals.node, ...globals.jest },
      sourceType: 'commonjs',
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
  },
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-floating-promises': 'warn',
      '@typescript-eslint/no-unsafe-argument': 'warn',
      // A leading underscore marks what is unused on purpose (a destructured-away key, an ignored argument).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'class-validator',
              allowTypeImports: true,
              message:
                'Import from class-validator/cjs/...: its index loads every built-in rule, validator.js and libphonenumber (300 modules, 3 MB of heap).',
            },
            {
              name: 'jwks-rsa',
              allowTypeImports: true,
              message:
                'Required where a key set is made (src/auth/jwks-key-set.ts): it loads jose, heap a broker without a JWKS URL does not need.',
            },
          ],
        },
      ],
    },
  },
  {
    // Tests and benchmarks read JSON answers, typed any by supertest and fetch, and hand methods to jest.
    files: [
      '**/*.spec.ts',
      '**/*.e2e-spec.ts',
      '**/*.fault-spec.ts',
      'test/**/*.ts',
      'client/test/**/*.ts',
      'bench/**/*.ts',
    ],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/require-await': 'off',
      // A test hands a signal's abort reason on as it is, as fetch does.
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
    },
  },
);
