export const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
/** What Express accepts after a route's path: a trailing slash and a query. */
export const PATH_END = '/?(?:\\?.*)?';

export interface FixedRoute {
  readonly path: string;
  readonly matches: (url: string) => boolean;
  /** No parameters for a POST of this route, else null (see FastRoute.match). */
  readonly params: (request: { method?: string; url?: string }) => Record<string, string> | null;
}

/** A POST route without parameters, matched as Express matches it: in any case, with an optional trailing slash and query. */
export function fixedPostRoute(path: string): FixedRoute {
  const pattern = new RegExp(`^${escapeRegExp(path)}${PATH_END}$`, 'i');
  const matches = (url: string) => pattern.test(url);
  return {
    path,
    matches,
    params: (request) => (request.method === 'POST' && matches(request.url ?? '') ? {} : null),
  };
}
