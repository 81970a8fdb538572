import { arrayLiteral } from './array-literal';

// node-postgres's own serialiser of parameters; its module has no type declarations.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (value: unknown) => unknown };

describe('arrayLiteral', () => {
  it.each([
    [['0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a01', '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a02']],
    [['plain', '', 'NULL', 'null', 'with space', 'a,b', '{braces}', 'quote"d', 'back\\slash', '\\"both"\\']],
    [['é', '😀', 'tab\there', null, 'end']],
    [[null, null]],
    [[]],
  ])('writes the text array %j as node-postgres would', (values: Array<string | null>) => {
    expect(arrayLiteral(values)).toBe(prepareValue(values));
  });

  it('writes numbers bare, where node-postgres quotes them: both read as the same bigint[]', () => {
    expect(arrayLiteral([1, 2, 9007199254740991, 0, -3])).toBe('{1,2,9007199254740991,0,-3}');
  });
});
