/** Keys for the tests only: fixed, so a failing test's rows can be read back by hand. */
export const TEST_KEY_ID = 'test-run';
export const TEST_ENCRYPTION_KEYS = `${TEST_KEY_ID}:${'0f1e2d3c4b5a6978'.repeat(4)}`;
export const KEY_1 = 'a1'.repeat(32);
export const KEY_2 = 'b2'.repeat(32);
