export const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
/** What Express accepts after a route's path: a trailing slash and a query. */
export const PATH_END = '/?(?:\\?.*)?';

export interface RoutePattern {
  readonly path: string;
  readonly matches: (url: string) => boolean;
  readonly params: (request: { method?: string; url?: string }) => Record<string, string> | null;
}

/** Matched as Express matches routes; a segment that does not decode is left to the router, which answers 400. */
export function routePattern(method: 'GET' | 'POST', path: string): RoutePattern {
  const names: string[] = [];
  const source = path
    .split(/(:\w+)/)
    .map((part) => {
      if (!part.startsWith(':')) return escapeRegExp(part);
      names.push(part.slice(1));
      return '([^/?]+)';
    })
    .join('');
  const pattern = new RegExp(`^${source}${PATH_END}$`, 'i');
  return {
    path,
    matches: (url) => pattern.test(url),
    params: (request) => {
      if (request.method !== method) return null;
      const match = pattern.exec(request.url ?? '');
      if (!match) return null;
      const params: Record<string, string> = {};
      for (let index = 0; index < names.length; index += 1) {
        const value = decodedSegment(match[index + 1]);
        if (value === undefined) return null;
        params[names[index]] = value;
      }
      return params;
    },
  };
}

function decodedSegment(segment: string): string | undefined {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
