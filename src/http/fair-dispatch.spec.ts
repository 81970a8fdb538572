import type { IncomingMessage } from 'node:http';
import { ANONYMOUS, arrivalOf, credentialProved, FairDispatch, UNIDENTIFIED } from './fair-dispatch';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

function caller(authorization?: string, extra: Record<string, string> = {}): IncomingMessage {
  const headers: Record<string, string> = { ...extra };
  if (authorization !== undefined) headers.authorization = authorization;
  return { headers, socket: { destroyed: false } } as unknown as IncomingMessage;
}

/** A dispatcher whose clock moves only when told: `spend(ms)` is a request that takes that long. */
function dispatcher(tenantHeader?: string) {
  let clock = 0;
  jest.spyOn(performance, 'now').mockImplementation(() => clock);
  const dispatch = new FairDispatch(tenantHeader);
  const started: string[] = [];
  const admit = (name: string, request: IncomingMessage, ms = 0) =>
    dispatch.admit(request, () => {
      started.push(name);
      clock += ms;
    });
  return { dispatch, started, admit };
}

/** Proves the credential through one request, in a turn of its own. */
async function prove(dispatch: FairDispatch, authorization: string, tenantId: string): Promise<void> {
  await nextTurn();
  const request = caller(authorization);
  dispatch.admit(request, () => credentialProved(request, tenantId));
  await nextTurn();
}

describe('FairDispatch', () => {
  afterEach(() => jest.restoreAllMocks());

  it('starts requests at once while the turn has time left', () => {
    const { dispatch, started, admit } = dispatcher();
    admit('a', caller('Bearer a'));
    admit('b', caller('Bearer b'));
    expect(started).toEqual(['a', 'b']);
    expect(dispatch.waiting).toBe(0);
    expect(dispatch.deferred).toBe(0);
  });

  it("past the turn's budget queues requests and starts them one tenant after the other", async () => {
    const { dispatch, started, admit } = dispatcher();
    await prove(dispatch, 'Bearer a', 'tenant-a');
    await prove(dispatch, 'Bearer b', 'tenant-b');
    admit('a0', caller('Bearer a'), 2);
    for (let n = 1; n <= 4; n += 1) admit(`a${n}`, caller('Bearer a'), 1);
    admit('b1', caller('Bearer b'), 1);
    expect(started).toEqual(['a0']);
    expect(dispatch.waiting).toBe(5);
    expect(dispatch.deferred).toBe(5);
    while (dispatch.waiting > 0) await nextTurn();
    expect(started).toEqual(['a0', 'a1', 'b1', 'a2', 'a3', 'a4']);
  });

  it('gives each slice of the queues a bounded time, with the loop turning between', async () => {
    const { dispatch, started, admit } = dispatcher();
    admit('first', caller('Bearer a'), 5);
    for (let n = 0; n < 3; n += 1) admit(`late${n}`, caller('Bearer a'), 5);
    await nextTurn();
    // The queued requests each take longer than a slice: one per turn.
    expect(started).toEqual(['first', 'late0']);
    while (dispatch.waiting > 0) await nextTurn();
    expect(started).toHaveLength(4);
  });

  it('keeps arrival order within a tenant while others queue', async () => {
    const { dispatch, started, admit } = dispatcher();
    admit('busy', caller('Bearer a'), 5);
    for (const name of ['x1', 'x2', 'x3']) admit(name, caller('Bearer a'), 5);
    await nextTurn();
    // Something queued: a request arriving in a fresh turn still waits behind it.
    admit('x4', caller('Bearer a'));
    while (dispatch.waiting > 0) await nextTurn();
    expect(started).toEqual(['busy', 'x1', 'x2', 'x3', 'x4']);
  });

  it('knows a credential by its tenant only once a request with it was proved', async () => {
    const { dispatch } = dispatcher();
    expect(dispatch.tenantOf(caller())).toBe(ANONYMOUS);
    expect(dispatch.tenantOf(caller('Bearer a'))).toBe(UNIDENTIFIED);
    // A request that never passes the guard proves nothing.
    dispatch.admit(caller('Bearer a'), () => undefined);
    expect(dispatch.tenantOf(caller('Bearer a'))).toBe(UNIDENTIFIED);
    await prove(dispatch, 'Bearer a', 'tenant-a');
    expect(dispatch.tenantOf(caller('Bearer a'))).toBe('tenant-a');
    expect(dispatch.tenantOf(caller('Bearer a2'))).toBe(UNIDENTIFIED);
  });

  it('tells apart the same token sent for different tenants through the tenant header', async () => {
    const { dispatch } = dispatcher('x-tenant');
    const forTenant = (tenant: string) => caller('Bearer shared', { 'x-tenant': tenant });
    const request = forTenant('one');
    dispatch.admit(request, () => credentialProved(request, 'tenant-one'));
    await nextTurn();
    expect(dispatch.tenantOf(forTenant('one'))).toBe('tenant-one');
    expect(dispatch.tenantOf(forTenant('two'))).toBe(UNIDENTIFIED);
    // With auth off the header alone is the credential.
    expect(dispatch.tenantOf(caller(undefined, { 'x-tenant': 'one' }))).toBe(UNIDENTIFIED);
  });

  it('does not start a request whose caller hung up while it waited', async () => {
    const { dispatch, started, admit } = dispatcher();
    admit('busy', caller('Bearer a'), 5);
    const gone = caller('Bearer a');
    admit('gone', gone);
    admit('here', caller('Bearer a'));
    (gone.socket as { destroyed: boolean }).destroyed = true;
    while (dispatch.waiting > 0) await nextTurn();
    expect(started).toEqual(['busy', 'here']);
  });

  it('marks when a queued request arrived, and only a queued one', () => {
    const { admit } = dispatcher();
    const atOnce = caller('Bearer a');
    admit('at once', atOnce, 5);
    const queued = caller('Bearer a');
    admit('queued', queued);
    expect(arrivalOf(atOnce)).toBeUndefined();
    expect(arrivalOf(queued)).toBe(5);
  });

  it("forgets a tenant's oldest credentials past 64, and never another tenant's for them", async () => {
    const { dispatch } = dispatcher();
    const proveNow = (authorization: string, tenantId: string) => {
      const request = caller(authorization);
      dispatch.admit(request, () => credentialProved(request, tenantId));
    };
    proveNow('Bearer quiet', 'tenant-quiet');
    for (let n = 0; n < 70; n += 1) {
      proveNow(`Bearer minted-${n}`, 'tenant-minting');
      await nextTurn();
    }
    expect(dispatch.tenantOf(caller('Bearer quiet'))).toBe('tenant-quiet');
    expect(dispatch.tenantOf(caller('Bearer minted-5'))).toBe(UNIDENTIFIED);
    expect(dispatch.tenantOf(caller('Bearer minted-6'))).toBe('tenant-minting');
    expect(dispatch.tenantOf(caller('Bearer minted-69'))).toBe('tenant-minting');
  });
});
