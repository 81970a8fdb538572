export const INT32_MAX = 2_147_483_647;
export const NAME_MAX_LENGTH = 255;
/** Deeper JSON than this is refused: JavaScript and PostgreSQL both recurse over it. */
export const JSON_MAX_DEPTH = 100;
