import { Controller, Get, INestApplication, Module, Post } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { FastRoute, KeepsUndecodable } from './fast-route.decorator';
import { FastRouteTable } from './fast-route-table';

@Controller('things')
class ThingsController {
  @Get(':id')
  @FastRoute()
  @KeepsUndecodable('id')
  read(): void {}

  @Post(['', 'many'])
  @FastRoute()
  make(): void {}

  @Get()
  list(): void {}
}

@Controller()
class RootController {
  @Post('ping')
  @FastRoute()
  ping(): void {}
}

async function tableOf(
  controllers: Array<new () => object>,
  configure: (app: INestApplication) => void = () => undefined,
): Promise<{ app: INestApplication; table: FastRouteTable }> {
  @Module({ imports: [DiscoveryModule], controllers, providers: [FastRouteTable] })
  class TestModule {}
  const moduleRef = await Test.createTestingModule({ imports: [TestModule] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  configure(app);
  await app.init();
  return { app, table: app.get(FastRouteTable) };
}

const described = (table: FastRouteTable) =>
  table.routes.map((route) => [route.name, route.method, route.path, route.keepsUndecodable]);

describe('FastRouteTable', () => {
  it('holds the handlers marked fast, with the method and each path the router gives them', async () => {
    const { app, table } = await tableOf([ThingsController, RootController]);

    expect(described(table)).toEqual([
      ['ThingsController.read', 'GET', '/things/:id', ['id']],
      ['ThingsController.make', 'POST', '/things', undefined],
      ['ThingsController.make', 'POST', '/things/many', undefined],
      ['RootController.ping', 'POST', '/ping', undefined],
    ]);
    expect(table.escapeUndecodable('/things/%zz', 'GET')).toBe('/things/%25zz');
    expect(table.pathOf('/Things/Many/', 'POST')).toBe('/things/many');
    expect(table.pathOf('/things/many', 'GET')).toBe('/things/:id');
    expect(table.pathOf('/things/many', 'DELETE')).toBe('/things/:id');
    await app.close();
  });

  it('applies the global prefix as Nest does, exclusions included', async () => {
    const { app, table } = await tableOf([ThingsController, RootController], (setUp) =>
      setUp.setGlobalPrefix('v2/', { exclude: ['ping'] }),
    );

    expect(table.routes.map((route) => route.path)).toEqual([
      '/v2/things/:id',
      '/v2/things',
      '/v2/things/many',
      '/ping',
    ]);
    await app.close();
  });

  it('refuses to start with a path it cannot match as Express does, naming the handler', async () => {
    @Controller('files')
    class FilesController {
      @Get('*path')
      @FastRoute()
      read(): void {}
    }

    await expect(tableOf([FilesController])).rejects.toThrow(
      '@FastRoute() FilesController.read cannot be served ahead of the router: its path /files/*path is not literal',
    );
  });

  it('refuses to start with @KeepsUndecodable() on a handler that is not fast', async () => {
    @Controller('slow')
    class SlowController {
      @Get(':id')
      @KeepsUndecodable('id')
      read(): void {}
    }

    await expect(tableOf([SlowController])).rejects.toThrow(
      'SlowController.read: @KeepsUndecodable() is read on fast routes only',
    );
  });
});
