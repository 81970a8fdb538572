import {
  ArgumentsHost,
  CanActivate,
  Catch,
  ExceptionFilter,
  HttpException,
  Logger,
  PipeTransform,
  VersioningType,
} from '@nestjs/common';
import { EXCEPTION_FILTERS_METADATA, GUARDS_METADATA, INTERCEPTORS_METADATA, PIPES_METADATA } from '@nestjs/common/constants';
import { ApplicationConfig, ModuleRef } from '@nestjs/core';
import { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { AppConfig } from '../config/app-config';
import { LeaseFastPathMiddleware } from './lease-fast-path.middleware';
import { LeaseController } from './lease.controller';

@Catch()
class CatchAll implements ExceptionFilter {
  catch(_exception: unknown, _host: ArgumentsHost): void {}
}

@Catch(HttpException)
class CatchHttpOnly implements ExceptionFilter {
  catch(_exception: unknown, _host: ArgumentsHost): void {}
}

class Allow implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

class Identity implements PipeTransform {
  transform(value: unknown): unknown {
    return value;
  }
}

const CONFIG = { bodyLimitBytes: 1024 } as AppConfig;

function middlewareFor(configure: (config: ApplicationConfig) => void): LeaseFastPathMiddleware {
  const config = new ApplicationConfig();
  config.useGlobalFilters(new CatchAll());
  configure(config);
  return new LeaseFastPathMiddleware({} as ModuleRef, config, CONFIG);
}

describe('LeaseFastPathMiddleware.activePipeline', () => {
  let warn: jest.SpyInstance;

  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });

  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('runs the global guards, in order, and the one catch-all filter', () => {
    const first = new Allow();
    const second = new Allow();
    const middleware = middlewareFor((config) => config.useGlobalGuards(first, second));

    const pipeline = middleware.activePipeline();

    expect(pipeline?.guards).toEqual([first, second]);
    expect(pipeline?.guards[0]).toBe(first);
    expect(pipeline?.filter).toBeInstanceOf(CatchAll);
    expect(warn).not.toHaveBeenCalled();
  });

  it('says why when it leaves the route to the router', () => {
    middlewareFor((config) => config.useGlobalInterceptors({ intercept: (_context, next) => next.handle() })).activePipeline();

    expect(warn).toHaveBeenCalledWith('The router serves the lease route: global interceptors are registered');
  });

  it.each<[string, (config: ApplicationConfig) => void]>([
    ['a global prefix', (config) => config.setGlobalPrefix('v1')],
    ['versioning', (config) => config.enableVersioning({ type: VersioningType.URI })],
    ['a global pipe', (config) => config.useGlobalPipes(new Identity())],
    ['a global interceptor', (config) => config.useGlobalInterceptors({ intercept: (_context, next) => next.handle() })],
    ['a request-scoped global guard', (config) => config.addGlobalRequestGuard(new InstanceWrapper())],
    ['a request-scoped global interceptor', (config) => config.addGlobalRequestInterceptor(new InstanceWrapper())],
    ['a request-scoped global pipe', (config) => config.addGlobalRequestPipe(new InstanceWrapper())],
    ['a request-scoped global filter', (config) => config.addGlobalRequestFilter(new InstanceWrapper())],
    ['a second exception filter', (config) => config.useGlobalFilters(new CatchAll())],
  ])('leaves the route to the router with %s', (_name, configure) => {
    expect(middlewareFor(configure).activePipeline()).toBeNull();
  });

  it('leaves the route to the router when the only filter catches some exceptions only', () => {
    const config = new ApplicationConfig();
    config.useGlobalFilters(new CatchHttpOnly());

    expect(new LeaseFastPathMiddleware({} as ModuleRef, config, CONFIG).activePipeline()).toBeNull();
  });

  it.each([
    ['guards', GUARDS_METADATA],
    ['interceptors', INTERCEPTORS_METADATA],
    ['pipes', PIPES_METADATA],
    ['exception filters', EXCEPTION_FILTERS_METADATA],
  ])('leaves the route to the router when the route declares its own %s', (_name, key) => {
    for (const target of [LeaseController, LeaseController.prototype.extend]) {
      Reflect.defineMetadata(key, [Allow], target);
      try {
        expect(middlewareFor(() => undefined).activePipeline()).toBeNull();
      } finally {
        Reflect.deleteMetadata(key, target);
      }
    }
  });

  it('decides once', () => {
    const config = new ApplicationConfig();
    config.useGlobalFilters(new CatchAll());
    const middleware = new LeaseFastPathMiddleware({} as ModuleRef, config, CONFIG);
    const pipeline = middleware.activePipeline();

    config.useGlobalInterceptors({ intercept: (_context, next) => next.handle() });

    expect(middleware.activePipeline()).toBe(pipeline);
  });
});
