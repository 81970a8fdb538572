/** Sent as it is, so that it can embed stored JSON without parsing and serialising it again. */
export class JsonText {
  constructor(readonly text: string) {}
}

/** Where a value lies in a JSON text: from `start` up to `end`; `spaced` when whitespace outside strings lies within. */
export interface JsonSpan {
  start: number;
  end: number;
  spaced: boolean;
}

/** Bounded on the text before JSON.parse allocates: walking millions of parsed values ran the broker out of heap. */
export interface JsonTextShape {
  /** Containers plus the items and members in them. */
  elements: number;
  depth: number;
  /** A string holds \u0000 (PostgreSQL cannot decode it to text, nor cast it to jsonb). */
  nul: boolean;
  /** A string holds half a surrogate pair, escaped (PostgreSQL's UTF-8 cannot hold it). */
  loneSurrogate: boolean;
  /**
   * When a member name was given: the value of each member of that name (not one inside another's value), by the
   * jsonPath of the object holding it. A repeated key is noted last, as JSON.parse keeps the last.
   */
  members?: Map<string, JsonSpan>;
}

const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LOWER_U = 0x75;

/** Set by skipString: whether the string it skipped holds an escape. */
let skippedEscape = false;

/**
 * Malformed text is measured as far as it goes; JSON.parse judges it afterwards. With `member`, the same walk notes
 * where each value of that member lies (shape.members), so that it can be kept as written.
 */
export function measureJsonText(
  text: string,
  maxElements = Infinity,
  maxDepth = Infinity,
  member?: string,
): JsonTextShape {
  const shape: JsonTextShape = { elements: 0, depth: 0, nul: false, loneSurrogate: false };
  // Without a backslash anywhere, a string ends at the next quote: indexOf finds it natively.
  const escaped = text.includes('\\');
  // A text that never names the member cannot hold it, unless an escape spells it.
  const locator =
    member !== undefined && (escaped || text.includes(member)) ? new MemberLocator(text, member) : undefined;
  let depth = 0;
  let awaitingFirst = false;
  let spaces = 0;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code <= 0x20) {
      spaces += 1;
      continue;
    }
    if (awaitingFirst) {
      awaitingFirst = false;
      if (code !== CLOSE_OBJECT && code !== CLOSE_ARRAY) shape.elements += 1;
    }
    if (code === QUOTE) {
      const start = index;
      index = escaped ? skipString(text, index, shape) : endOfString(text, index);
      locator?.string(start, index, depth, escaped && skippedEscape, spaces);
    } else if (code === OPEN_OBJECT || code === OPEN_ARRAY) {
      depth += 1;
      shape.elements += 1;
      if (depth > shape.depth) shape.depth = depth;
      awaitingFirst = true;
      locator?.open(depth, code === OPEN_OBJECT);
    } else if (code === CLOSE_OBJECT || code === CLOSE_ARRAY) {
      locator?.end(index, depth, spaces);
      depth -= 1;
    } else if (code === COMMA && depth > 0) {
      shape.elements += 1;
      locator?.comma(index, depth, spaces);
    }
    if (shape.elements > maxElements || shape.depth > maxDepth) break;
  }
  if (member !== undefined) shape.members = locator?.found ?? new Map<string, JsonSpan>();
  return shape;
}

/** The key measureJsonText files a member's value under: jsonPath('items', 3) is where items[3] is. */
export function jsonPath(...segments: Array<string | number>): string {
  let path = '';
  for (const segment of segments) path += typeof segment === 'number' ? `[${segment}]` : `.${JSON.stringify(segment)}`;
  return path;
}

/** The value's text without the whitespace outside its strings; everything else as written. */
export function minifiedJson(text: string, span: JsonSpan = { start: 0, end: text.length, spaced: true }): string {
  if (!span.spaced) return text.slice(span.start, span.end);
  let minified = '';
  let run = span.start;
  for (let index = span.start; index < span.end; index += 1) {
    const code = text.charCodeAt(index);
    if (code === QUOTE) {
      index = closingQuote(text, index);
    } else if (code <= 0x20) {
      minified += text.slice(run, index);
      while (index + 1 < span.end && text.charCodeAt(index + 1) <= 0x20) index += 1;
      run = index + 1;
    }
  }
  return minified + text.slice(run, span.end);
}

/** The quote ending the string opened at `start`: the next one not escaped (after an even run of backslashes). */
function closingQuote(text: string, start: number): number {
  let quote = text.indexOf('"', start + 1);
  while (quote !== -1) {
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return quote;
    quote = text.indexOf('"', quote + 1);
  }
  return text.length;
}

/**
 * Follows the path from the root to the current position (per depth: object or array, and the member's key or the
 * item's index) outside the values it notes, and notes each value of `member` when its object moves on or closes.
 */
class MemberLocator {
  readonly found = new Map<string, JsonSpan>();
  private readonly quoted: string;
  private readonly objects: boolean[] = [];
  /** Per depth: the index of the current item, or the opening quote of the current member's key. */
  private readonly positions: number[] = [];
  /** Per depth, in objects: the closing quote of the current member's key. */
  private readonly keyEnds: number[] = [];
  private expectsKey = false;
  /** The depth of the object whose member's value is being walked past, or -1. */
  private valueDepth = -1;
  private spacesBeforeValue = 0;

  constructor(
    private readonly text: string,
    member: string,
  ) {
    this.quoted = JSON.stringify(member);
  }

  open(depth: number, object: boolean): void {
    if (this.valueDepth !== -1) return;
    this.objects[depth] = object;
    this.positions[depth] = 0;
    this.expectsKey = object;
  }

  string(start: number, end: number, depth: number, escapes: boolean, spaces: number): void {
    if (this.valueDepth !== -1 || !this.expectsKey) return;
    this.expectsKey = false;
    this.positions[depth] = start;
    this.keyEnds[depth] = end;
    if (this.isMember(start, end, escapes)) {
      this.valueDepth = depth;
      this.spacesBeforeValue = spaces;
    }
  }

  comma(index: number, depth: number, spaces: number): void {
    if (this.valueDepth === depth) this.note(index, spaces);
    if (this.valueDepth !== -1) return;
    if (this.objects[depth]) {
      this.expectsKey = true;
    } else {
      this.positions[depth] += 1;
      this.expectsKey = false;
    }
  }

  end(index: number, depth: number, spaces: number): void {
    if (this.valueDepth === depth) this.note(index, spaces);
  }

  private isMember(start: number, end: number, escapes: boolean): boolean {
    const text = this.text;
    if (end - start + 1 === this.quoted.length && text.startsWith(this.quoted, start)) return true;
    return escapes && this.keyAt(start, end) === this.quoted;
  }

  /** The value ends before `terminator`; whitespace is counted between the key and it. */
  private note(terminator: number, spaces: number): void {
    const text = this.text;
    const depth = this.valueDepth;
    this.valueDepth = -1;
    const colon = text.indexOf(':', this.keyEnds[depth] + 1);
    if (colon === -1 || colon > terminator) return;
    let start = colon + 1;
    while (start < terminator && text.charCodeAt(start) <= 0x20) start += 1;
    let end = terminator;
    while (end > start && text.charCodeAt(end - 1) <= 0x20) end -= 1;
    const around = start - this.keyEnds[depth] - 2 + (terminator - end);
    this.found.set(this.path(depth), { start, end, spaced: spaces - this.spacesBeforeValue > around });
  }

  private path(depth: number): string {
    let path = '';
    for (let level = 1; level < depth; level += 1) {
      path += this.objects[level]
        ? `.${this.keyAt(this.positions[level], this.keyEnds[level])}`
        : `[${this.positions[level]}]`;
    }
    return path;
  }

  /** The key as JSON.stringify writes it, whatever escapes spelt it. */
  private keyAt(start: number, end: number): string {
    const raw = this.text.slice(start, end + 1);
    if (!raw.includes('\\')) return raw;
    try {
      return JSON.stringify(JSON.parse(raw));
    } catch {
      return raw;
    }
  }
}

function endOfString(text: string, start: number): number {
  const end = text.indexOf('"', start + 1);
  return end === -1 ? text.length : end;
}

function skipString(text: string, start: number, shape: JsonTextShape): number {
  skippedEscape = false;
  for (let index = start + 1; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code === QUOTE) return index;
    if (code !== BACKSLASH) continue;
    skippedEscape = true;
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
