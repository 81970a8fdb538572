import { DynamicModule, ForwardReference, RequestMethod, Type } from '@nestjs/common';
import { METHOD_METADATA, MODULE_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { AccessLevel } from '../../src/auth/access-level';
import { ACCESS_LEVEL_KEY } from '../../src/auth/access.decorator';

export interface DiscoveredRoute {
  /** `POST /api/v1/lease/:leaseId/extend` */
  key: string;
  /** What @Access declares on the handler, else on the controller, else the guard's admin default. */
  level: AccessLevel;
  declared: boolean;
}

type ModuleEntry = Type | DynamicModule | ForwardReference | Promise<DynamicModule> | undefined;

/**
 * Every controller route reachable from a root module, read from Nest's
 * decorator metadata without booting anything. Synchronous on purpose: the
 * security suite decides at collection time which of its rows exist in this
 * build and skips the others by name.
 */
export function discoverRoutes(root: Type): DiscoveredRoute[] {
  const visited = new Set<unknown>();
  const controllers = new Set<Type>();

  const visit = (entry: ModuleEntry): void => {
    // forRoot() of @nestjs/config returns a promise; such modules bring no controllers.
    if (!entry || entry instanceof Promise || visited.has(entry)) return;
    visited.add(entry);
    if ('forwardRef' in entry) {
      visit(entry.forwardRef());
      return;
    }
    const dynamic = 'module' in entry ? entry : undefined;
    const moduleClass = dynamic ? dynamic.module : (entry as Type);
    const own = (key: string): unknown[] => Reflect.getMetadata(key, moduleClass) ?? [];
    for (const controller of [...own(MODULE_METADATA.CONTROLLERS), ...(dynamic?.controllers ?? [])]) {
      controllers.add(controller as Type);
    }
    for (const imported of [...own(MODULE_METADATA.IMPORTS), ...(dynamic?.imports ?? [])]) {
      visit(imported as ModuleEntry);
    }
  };
  visit(root);

  const routes: DiscoveredRoute[] = [];
  for (const controller of controllers) {
    const prefixes = asArray(Reflect.getMetadata(PATH_METADATA, controller));
    const classLevel = Reflect.getMetadata(ACCESS_LEVEL_KEY, controller) as AccessLevel | undefined;
    for (const name of Object.getOwnPropertyNames(controller.prototype)) {
      const handler = (Object.getOwnPropertyDescriptor(controller.prototype, name) ?? {}).value;
      if (typeof handler !== 'function' || name === 'constructor') continue;
      const paths = Reflect.getMetadata(PATH_METADATA, handler);
      if (paths === undefined) continue;
      const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod];
      const handlerLevel = Reflect.getMetadata(ACCESS_LEVEL_KEY, handler) as AccessLevel | undefined;
      for (const prefix of prefixes) {
        for (const path of asArray(paths)) {
          routes.push({
            key: `${method} ${joinPath(prefix, path)}`,
            level: handlerLevel ?? classLevel ?? 'admin',
            declared: (handlerLevel ?? classLevel) !== undefined,
          });
        }
      }
    }
  }
  return routes;
}

function asArray(value: unknown): string[] {
  if (value === undefined) return [''];
  // Nest's path metadata: a string or an array of them.
  return Array.isArray(value) ? (value as string[]) : [value as string];
}

function joinPath(prefix: string, path: string): string {
  const joined = `/${[prefix, path].join('/')}`.replace(/\/+/g, '/');
  return joined.length > 1 ? joined.replace(/\/$/, '') : joined;
}
