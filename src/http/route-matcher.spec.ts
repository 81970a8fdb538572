import { RouteMatcher, routePathProblem } from './route-matcher';

const LEASE = { method: 'POST', path: '/api/v1/lease/:leaseId/extend', keepsUndecodable: ['leaseId'] };
const PUSH = { method: 'POST', path: '/api/v1/push' };
const ACK = { method: 'POST', path: '/api/v1/ack' };
const ACK_BATCH = { method: 'POST', path: '/api/v1/ack/batch' };
const POP_QUEUE = { method: 'GET', path: '/api/v1/pop/queue/:queue' };
const POP_PARTITION = { method: 'GET', path: '/api/v1/pop/queue/:queue/partition/:partition' };

const matcher = new RouteMatcher([LEASE, PUSH, ACK, ACK_BATCH, POP_QUEUE, POP_PARTITION]);

describe('RouteMatcher.match', () => {
  it.each([
    ['POST', '/api/v1/push', PUSH, {}],
    ['POST', '/API/V1/PUSH/?x=1', PUSH, {}],
    ['POST', '/api/v1/ack', ACK, {}],
    ['POST', '/api/v1/ack/batch/', ACK_BATCH, {}],
    ['POST', '/api/v1/lease/a%20b/extend', LEASE, { leaseId: 'a b' }],
    ['POST', '/api/v1/lease/%E0%A4%A/extend?x', LEASE, { leaseId: '%E0%A4%A' }],
    ['GET', '/api/v1/pop/queue/Q1', POP_QUEUE, { queue: 'Q1' }],
    ['GET', '/API/v1/pop/queue/a%2Fb/partition/P%201/?batch=2', POP_PARTITION, { queue: 'a/b', partition: 'P 1' }],
  ])('matches %s %s as Express routes it', (method, url, route, params) => {
    expect(matcher.match({ method, url })).toEqual({ route, params });
  });

  it.each([
    ['GET', '/api/v1/push'],
    ['HEAD', '/api/v1/pop/queue/q'],
    ['POST', '/api/v1/push/more'],
    ['POST', '/api/v1/pushes'],
    ['POST', '/api/v1/lease//extend'],
    ['GET', '/api/v1/pop/queue/q/partition/'],
    ['GET', '/api/v1/pop/queue/%E0%A4%A'],
    ['POST', undefined],
    [undefined, '/api/v1/push'],
  ])('leaves %s %s to the router', (method, url) => {
    expect(matcher.match({ method, url })).toBeNull();
  });
});

describe('RouteMatcher.routeOfPath', () => {
  it('finds the route of a path whatever the method, and nothing for another path', () => {
    expect(matcher.routeOfPath('/api/v1/lease/x/extend')).toBe(LEASE);
    expect(matcher.routeOfPath('/API/v1/pop/queue/q/')).toBe(POP_QUEUE);
    expect(matcher.routeOfPath('/api/v1/ack/batch?x=1')).toBe(ACK_BATCH);
    expect(matcher.routeOfPath('/api/v1/queues')).toBeUndefined();
  });

  it("prefers the route of the request's own method where paths of two methods overlap", () => {
    const overlapping = new RouteMatcher([
      { method: 'GET', path: '/things/:id' },
      { method: 'POST', path: '/things/many' },
    ]);

    expect(overlapping.routeOfPath('/things/many', 'POST')?.path).toBe('/things/many');
    expect(overlapping.routeOfPath('/things/many', 'GET')?.path).toBe('/things/:id');
  });
});

describe('RouteMatcher.escapeUndecodable', () => {
  it("escapes the % signs of a kept parameter's segment that does not decode, and only those", () => {
    expect(matcher.escapeUndecodable('/api/v1/lease/%E0%A4%A/extend?x=%E0')).toBe(
      '/api/v1/lease/%25E0%25A4%25A/extend?x=%E0',
    );
    expect(matcher.escapeUndecodable('/API/V1/LEASE/%zz/EXTEND/')).toBe('/API/V1/LEASE/%25zz/EXTEND/');
    expect(matcher.escapeUndecodable('/api/v1/lease/a%20b/extend')).toBeUndefined();
    expect(matcher.escapeUndecodable('/api/v1/pop/queue/%E0%A4%A')).toBeUndefined();
    expect(matcher.escapeUndecodable('/api/v1/queues')).toBeUndefined();
  });

  it('escapes each kept segment in place when there are several', () => {
    const two = new RouteMatcher([{ method: 'GET', path: '/a/:x/b/:y', keepsUndecodable: ['x', 'y'] }]);

    expect(two.escapeUndecodable('/a/%E0/b/%zz')).toBe('/a/%25E0/b/%25zz');
    expect(two.escapeUndecodable('/A/ok/B/%zz')).toBe('/A/ok/B/%25zz');
  });
});

describe('RouteMatcher without routes', () => {
  it('matches nothing, the root path included', () => {
    const none = new RouteMatcher([]);

    expect(none.match({ method: 'GET', url: '/' })).toBeNull();
    expect(none.routeOfPath('/')).toBeUndefined();
    expect(none.escapeUndecodable('/%zz')).toBeUndefined();
  });
});

describe('routePathProblem', () => {
  it.each([
    ['/files/*path', 'is not literal but :name'],
    ['/files{/:name}', 'is not literal but :name'],
    ['/a/:id/b', undefined],
  ])('says whether %s can be matched here', (path, problem) => {
    const found = routePathProblem({ method: 'GET', path });

    if (problem) expect(found).toContain(problem);
    else expect(found).toBeUndefined();
  });

  it('refuses to keep a parameter the path does not have', () => {
    expect(routePathProblem({ method: 'GET', path: '/a/:id', keepsUndecodable: ['name'] })).toBe(
      'its path /a/:id has no parameter name',
    );
  });
});
