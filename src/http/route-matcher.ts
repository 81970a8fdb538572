export interface MatchedRoute {
  /** As the router declares it, `:name` for each parameter. */
  readonly method: string;
  readonly path: string;
  /** Parameters whose segment reaches the handler as sent when its percent-encoding does not decode. */
  readonly keepsUndecodable?: readonly string[];
}

export interface RouteMatch<T> {
  route: T;
  params: Record<string, string>;
}

/** What Express accepts after a route's path: a trailing slash and a query. */
const PATH_END = '/?(?:\\?.*)?';
const PARAMETER = /(:\w+)/;
/** path-to-regexp's syntax beyond `:name` (wildcards, optional parts, groups): Express would match more than this does. */
const UNMATCHED_SYNTAX = /[*?+(){}[\]!\\]|:/;

interface Compiled<T> {
  route: T;
  /** The index of the group around the whole route; its parameters' groups follow. */
  group: number;
  names: readonly string[];
  kept: ReadonlySet<string>;
}

interface Alternation<T> {
  pattern: RegExp;
  routes: ReadonlyArray<Compiled<T>>;
}

/**
 * Matches requests as Express routes them (in any case, with an optional trailing slash and query, each `:name` one
 * path segment, percent-decoded), all routes of a method in one regular expression. A segment that does not decode
 * is no match, left to the router, which answers 400, unless its parameter keeps undecodable segments.
 */
export class RouteMatcher<T extends MatchedRoute> {
  private readonly byMethod = new Map<string, Alternation<T>>();
  private readonly anyMethod: Alternation<T>;
  private readonly keepsAny: boolean;

  constructor(readonly routes: readonly T[]) {
    for (const route of routes) {
      const problem = routePathProblem(route);
      if (problem) throw new Error(problem);
    }
    for (const method of new Set(routes.map((route) => route.method))) {
      this.byMethod.set(method, alternation(routes.filter((route) => route.method === method)));
    }
    const byPath = new Map(routes.map((route) => [route.path.toLowerCase(), route]));
    this.anyMethod = alternation([...byPath.values()]);
    this.keepsAny = routes.some((route) => (route.keepsUndecodable?.length ?? 0) > 0);
  }

  match(request: { method?: string; url?: string }): RouteMatch<T> | null {
    const alternation = this.byMethod.get(request.method ?? '');
    if (alternation === undefined) return null;
    const found = alternation.pattern.exec(request.url ?? '');
    if (found === null) return null;
    const compiled = matchedOf(alternation, found);
    const params: Record<string, string> = {};
    for (let index = 0; index < compiled.names.length; index += 1) {
      const name = compiled.names[index];
      const segment = found[compiled.group + 1 + index];
      const value = decodedSegment(segment);
      if (value !== undefined) params[name] = value;
      else if (compiled.kept.has(name)) params[name] = segment;
      else return null;
    }
    return { route: compiled.route, params };
  }

  /** The route whose path this is, the method's first, else any method's: what a request is counted under. */
  routeOfPath(url: string, method?: string): T | undefined {
    return this.pathMatch(url, method)?.compiled.route;
  }

  /**
   * The url with the `%` of each kept segment that does not decode escaped, so that Express, which refuses such a
   * segment with 400, gives the handler the segment as sent; undefined when nothing needs it.
   */
  escapeUndecodable(url: string, method?: string): string | undefined {
    // Every request the router serves comes here: most have nothing to decode, and cost no match.
    if (!this.keepsAny || !url.includes('%')) return undefined;
    const matched = this.pathMatch(url, method);
    if (matched === undefined || matched.compiled.kept.size === 0) return undefined;
    const { found, compiled } = matched;
    let escaped: string | undefined;
    for (let index = compiled.names.length - 1; index >= 0; index -= 1) {
      const group = compiled.group + 1 + index;
      const segment = found[group];
      if (!compiled.kept.has(compiled.names[index]) || decodedSegment(segment) !== undefined) continue;
      const start = groupStart(found, compiled, index);
      const text = escaped ?? url;
      escaped = `${text.slice(0, start)}${segment.replace(/%/g, '%25')}${text.slice(start + segment.length)}`;
    }
    return escaped;
  }

  private pathMatch(url: string, method?: string): { found: RegExpExecArray; compiled: Compiled<T> } | undefined {
    for (const alternation of [this.byMethod.get(method ?? ''), this.anyMethod]) {
      const found = alternation?.pattern.exec(url);
      if (found) return { found, compiled: matchedOf(alternation!, found) };
    }
    return undefined;
  }
}

function alternation<T extends MatchedRoute>(routes: readonly T[]): Alternation<T> {
  const compiled: Array<Compiled<T>> = [];
  const sources: string[] = [];
  let group = 1;
  for (const route of routes) {
    const names: string[] = [];
    const source = route.path
      .split(PARAMETER)
      .map((part) => {
        if (!part.startsWith(':')) return escapeRegExp(part);
        names.push(part.slice(1));
        return '([^/?]+)';
      })
      .join('');
    compiled.push({ route, group, names, kept: new Set(route.keepsUndecodable ?? []) });
    sources.push(`(${source})`);
    group += 1 + names.length;
  }
  // No routes match nothing (an empty alternation would match the root path).
  if (sources.length === 0) return { pattern: /(?!)/, routes: compiled };
  return { pattern: new RegExp(`^(?:${sources.join('|')})${PATH_END}$`, 'i'), routes: compiled };
}

function matchedOf<T>(alternation: Alternation<T>, found: RegExpExecArray): Compiled<T> {
  const { routes } = alternation;
  for (let index = 0; index < routes.length - 1; index += 1) {
    if (found[routes[index].group] !== undefined) return routes[index];
  }
  return routes[routes.length - 1];
}

/** Where a parameter's segment starts in the url: after the route's literal parts and the segments before it. */
function groupStart<T>(found: RegExpExecArray, compiled: Compiled<T>, index: number): number {
  const before = (compiled.route as MatchedRoute).path.split(PARAMETER).slice(0, 2 * index + 1);
  let start = 0;
  for (let part = 0; part < before.length; part += 1) {
    start += part % 2 === 0 ? before[part].length : found[compiled.group + 1 + (part - 1) / 2].length;
  }
  return start;
}

/** Why this matcher cannot match a route as Express does, if it cannot. */
export function routePathProblem(route: MatchedRoute): string | undefined {
  const literal = route.path.split(PARAMETER).filter((part) => !part.startsWith(':'));
  if (literal.some((part) => UNMATCHED_SYNTAX.test(part))) return `its path ${route.path} is not literal but :name`;
  const names = route.path.split(PARAMETER).filter((part) => part.startsWith(':'));
  for (const kept of route.keepsUndecodable ?? []) {
    if (!names.includes(`:${kept}`)) return `its path ${route.path} has no parameter ${kept}`;
  }
  return undefined;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

function decodedSegment(segment: string): string | undefined {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
