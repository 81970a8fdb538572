import { Injectable, OnModuleInit, RequestMethod, Type } from '@nestjs/common';
import { METHOD_METADATA, MODULE_PATH, PATH_METADATA } from '@nestjs/common/constants';
import { ApplicationConfig, DiscoveryService, MetadataScanner, ModulesContainer } from '@nestjs/core';
import type { Module } from '@nestjs/core/injector/module';
// Nest's own joining of prefix, module, controller and method paths, so a fast route is where the router puts it.
import { RoutePathFactory } from '@nestjs/core/router/route-path-factory';
import { FAST_ROUTE_METADATA, KEEPS_UNDECODABLE_METADATA } from './fast-route.decorator';
import { MatchedRoute, RouteMatcher, routePathProblem } from './route-matcher';

export interface FastRouteEntry extends MatchedRoute {
  readonly controller: Type<object>;
  readonly handler: string;
  /** `Controller.handler`, as errors and logs name it. */
  readonly name: string;
  /** The module that declares the controller. */
  readonly host: Module | undefined;
}

/** The handlers marked @FastRoute(), with the method and path the router gives them; read once, at start-up. */
@Injectable()
export class FastRouteTable implements OnModuleInit {
  private matcher = new RouteMatcher<FastRouteEntry>([]);

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly config: ApplicationConfig,
    private readonly modules: ModulesContainer,
  ) {}

  get routes(): readonly FastRouteEntry[] {
    return this.matcher.routes;
  }

  /** After setupApp, which may set a global prefix, and before any request. */
  onModuleInit(): void {
    const routes: FastRouteEntry[] = [];
    for (const wrapper of this.discovery.getControllers()) {
      const controller = wrapper.metatype as Type<object> | null;
      if (!controller) continue;
      const prototype = controller.prototype as Record<string, object>;
      for (const handler of this.scanner.getAllMethodNames(prototype)) {
        const name = `${controller.name}.${handler}`;
        const method = prototype[handler];
        const keepsUndecodable = Reflect.getMetadata(KEEPS_UNDECODABLE_METADATA, method) as string[] | undefined;
        if (Reflect.getMetadata(FAST_ROUTE_METADATA, method) !== true) {
          if (keepsUndecodable) throw new Error(`${name}: @KeepsUndecodable() is read on fast routes only`);
          continue;
        }
        for (const [verb, path] of this.pathsOf(controller, method, wrapper.host, name)) {
          const route = { controller, handler, name, host: wrapper.host, method: verb, path, keepsUndecodable };
          const problem = routePathProblem(route);
          if (problem) throw fastRouteError(name, problem);
          routes.push(route);
        }
      }
    }
    this.matcher = new RouteMatcher(routes);
  }

  /** The route pattern of a request's path: its method's route, else another method's. */
  pathOf(url: string, method?: string): string | undefined {
    return this.matcher.routeOfPath(url, method)?.path;
  }

  escapeUndecodable(url: string, method?: string): string | undefined {
    return this.matcher.escapeUndecodable(url, method);
  }

  private pathsOf(controller: Type<object>, method: object, host: Module | undefined, name: string): string[][] {
    const requestMethod = Reflect.getMetadata(METHOD_METADATA, method) as RequestMethod | undefined;
    const methodPath = Reflect.getMetadata(PATH_METADATA, method) as string | string[] | undefined;
    if (requestMethod === undefined || methodPath === undefined) throw fastRouteError(name, 'it is not a route');
    if (requestMethod === RequestMethod.ALL) throw fastRouteError(name, 'it answers every method');
    const verb = RequestMethod[requestMethod];
    const factory = new RoutePathFactory(this.config);
    const prefix = this.config.getGlobalPrefix();
    const modulePath = host
      ? ((Reflect.getMetadata(MODULE_PATH + this.modules.applicationId, host.metatype) ??
          Reflect.getMetadata(MODULE_PATH, host.metatype)) as string | undefined)
      : undefined;
    const controllerPaths = listOf(Reflect.getMetadata(PATH_METADATA, controller) as string | string[]);
    return controllerPaths.flatMap((ctrlPath) =>
      listOf(methodPath).flatMap((path) =>
        factory
          .create(
            {
              ctrlPath: withLeadingSlash(ctrlPath),
              methodPath: withLeadingSlash(path),
              modulePath,
              globalPrefix: prefix ? withLeadingSlash(prefix) : '',
            },
            requestMethod,
          )
          .map((full) => [verb, full]),
      ),
    );
  }
}

export function fastRouteError(name: string, reason: string): Error {
  return new Error(`@FastRoute() ${name} cannot be served ahead of the router: ${reason}`);
}

function listOf(path: string | string[]): string[] {
  return Array.isArray(path) ? path : [path];
}

function withLeadingSlash(path: string): string {
  return path.startsWith('/') ? path : `/${path}`;
}
