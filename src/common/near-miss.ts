import leven from 'leven';

/** How far a name may be from the one it was meant to be, by the length of that one. */
export type Tolerance = (length: number) => number;

/** A suggestion under an error already given: a loose match costs nothing. */
export const KEY_TOLERANCE: Tolerance = (length) => (length <= 3 ? 0 : length <= 5 ? 1 : 2);

/** Whether a variable is a typo decides whether the broker starts: `HOST` must not be taken for `HOME`. */
export const SETTING_TOLERANCE: Tolerance = (length) => (length <= 4 ? 0 : length <= 8 ? 1 : 2);

/** Case, `_` and `-` do not tell names apart to a reader: `DB_POOLSIZE` is `DB_POOL_SIZE`, `transactionID` is `transactionId`. */
function folded(name: string): string {
  return name.replace(/[_-]/g, '').toUpperCase();
}

/** Levenshtein's distance, with two neighbours typed in the wrong order (`stauts`) counting one edit, not two. */
function distance(given: string, wanted: string): number {
  const edits = leven(given, wanted);
  return edits === 2 && isSwap(given, wanted) ? 1 : edits;
}

function isSwap(given: string, wanted: string): boolean {
  if (given.length !== wanted.length) return false;
  let at = 0;
  while (at < given.length && given[at] === wanted[at]) at += 1;
  return given[at] === wanted[at + 1] && given[at + 1] === wanted[at] && given.slice(at + 2) === wanted.slice(at + 2);
}

/** The candidate `name` is most likely a misspelling of, if any is close enough; ties go to the first. */
export function nearMiss(name: string, candidates: Iterable<string>, tolerance: Tolerance): string | undefined {
  const given = folded(name);
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    if (candidate === name) return undefined;
    const wanted = folded(candidate);
    const allowed = tolerance(wanted.length);
    // Cheap bound first: a long caller-chosen name never reaches the quadratic distance.
    if (Math.abs(wanted.length - given.length) > allowed) continue;
    const edits = distance(given, wanted);
    if (edits <= allowed && (best === undefined || edits < best.distance)) best = { candidate, distance: edits };
  }
  return best?.candidate;
}
