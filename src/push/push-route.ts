export const PUSH_CONTROLLER_PATH = 'api/v1/push';
export const PUSH_ROUTE = `/${PUSH_CONTROLLER_PATH}`;

// Case-insensitive and with an optional trailing slash and query, as Express routes by default.
const PATTERN = new RegExp(`^${PUSH_ROUTE.replace(/\//g, '\\/')}\\/?(?:\\?.*)?$`, 'i');

export function matchPush(url: string): boolean {
  return PATTERN.test(url);
}

export function pushParams(request: { method?: string; url?: string }): Record<string, string> | null {
  return request.method === 'POST' && matchPush(request.url ?? '') ? {} : null;
}
