/**
 * The claim at `path`: a name as it stands (Auth0's namespaced claims such as https://example.com/tenant hold dots),
 * else a dotted path into nested objects (Keycloak's realm_access.roles). Undefined when nothing is there.
 */
export function readClaim(claims: Record<string, unknown>, path: string): { value: unknown } | undefined {
  if (Object.hasOwn(claims, path)) return { value: claims[path] };
  for (let dot = path.indexOf('.'); dot !== -1; dot = path.indexOf('.', dot + 1)) {
    const head = path.slice(0, dot);
    const nested = Object.hasOwn(claims, head) ? claims[head] : undefined;
    if (nested !== null && typeof nested === 'object' && !Array.isArray(nested)) {
      const found = readClaim(nested as Record<string, unknown>, path.slice(dot + 1));
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
