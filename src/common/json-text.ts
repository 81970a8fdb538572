/** Sent as it is, so that it can embed stored JSON without parsing and serialising it again. */
export class JsonText {
  constructor(readonly text: string) {}
}

/** Bounded on the text before JSON.parse allocates: walking millions of parsed values ran the broker out of heap. */
export interface JsonTextShape {
  /** Containers plus the items and members in them. */
  elements: number;
  depth: number;
  /** A string holds \u0000 (PostgreSQL's jsonb cannot store it). */
  nul: boolean;
  /** A string holds half a surrogate pair, escaped (PostgreSQL's UTF-8 cannot hold it). */
  loneSurrogate: boolean;
}

const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LOWER_U = 0x75;

/** Malformed text is measured as far as it goes; JSON.parse judges it afterwards. */
export function measureJsonText(text: string, maxElements = Infinity, maxDepth = Infinity): JsonTextShape {
  const shape: JsonTextShape = { elements: 0, depth: 0, nul: false, loneSurrogate: false };
  // Without a backslash anywhere, a string ends at the next quote: indexOf finds it natively.
  const escaped = text.includes('\\');
  let depth = 0;
  let awaitingFirst = false;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code <= 0x20) continue;
    if (awaitingFirst) {
      awaitingFirst = false;
      if (code !== CLOSE_OBJECT && code !== CLOSE_ARRAY) shape.elements += 1;
    }
    if (code === QUOTE) {
      index = escaped ? skipString(text, index, shape) : endOfString(text, index);
    } else if (code === OPEN_OBJECT || code === OPEN_ARRAY) {
      depth += 1;
      shape.elements += 1;
      if (depth > shape.depth) shape.depth = depth;
      awaitingFirst = true;
    } else if (code === CLOSE_OBJECT || code === CLOSE_ARRAY) {
      depth -= 1;
    } else if (code === COMMA && depth > 0) {
      shape.elements += 1;
    }
    if (shape.elements > maxElements || shape.depth > maxDepth) break;
  }
  return shape;
}

function endOfString(text: string, start: number): number {
  const end = text.indexOf('"', start + 1);
  return end === -1 ? text.length : end;
}

function skipString(text: string, start: number, shape: JsonTextShape): number {
  for (let index = start + 1; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code === QUOTE) return index;
    if (code !== BACKSLASH) continue;
    index += 1;
    if (text.charCodeAt(index) !== LOWER_U) continue;
    const unit = parseInt(text.slice(index + 1, index + 5), 16);
    if (unit === 0) shape.nul = true;
    // A high half followed by an escaped low half is a pair; anything else in the range is alone.
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.startsWith('\\u', index + 5) ? parseInt(text.slice(index + 7, index + 11), 16) : NaN;
      if (next >= 0xdc00 && next <= 0xdfff) index += 6;
      else shape.loneSurrogate = true;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      shape.loneSurrogate = true;
    }
    index += 4;
  }
  return text.length;
}
