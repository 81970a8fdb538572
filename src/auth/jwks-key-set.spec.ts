import { generateKeyPairSync, JsonWebKey } from 'node:crypto';
import { createServer, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { IdentityProviderUnavailableError, JwksKeySet, SigningKeyNotFoundError } from './jwks-key-set';

const publicJwk = (kid: string): JsonWebKey => ({
  ...generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }),
  kid,
  use: 'sig',
});

const CACHE_MS = 60_000;
const REFETCH_MS = 1_000;
// A provider on loopback answers in milliseconds, and in seconds on a machine busy with other work: only the test of the
// timeout itself sets a short one.
const TIMEOUT_MS = 5_000;
const SHORT_TIMEOUT_MS = 300;

/** A provider whose key set and manners the test sets; it counts the fetches it answers or holds. */
class FakeProvider {
  keys: JsonWebKey[] = [];
  mode: 'answer' | 'fail' | 'hang' = 'answer';
  fetches = 0;
  private readonly held: ServerResponse[] = [];
  readonly server: Server = createServer((_request, response) => {
    this.fetches += 1;
    if (this.mode === 'hang') {
      this.held.push(response);
      return;
    }
    response.statusCode = this.mode === 'fail' ? 502 : 200;
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ keys: this.keys }));
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/certs`;
  }

  async stop(): Promise<void> {
    for (const response of this.held) response.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

describe('JwksKeySet', () => {
  const provider = new FakeProvider();
  let url: string;
  let clock: number;
  let keySet: JwksKeySet;

  beforeAll(async () => {
    url = await provider.start();
  });

  afterAll(async () => {
    await provider.stop();
  });

  beforeEach(() => {
    provider.keys = [publicJwk('a'), publicJwk('b')];
    provider.mode = 'answer';
    provider.fetches = 0;
    clock = 1_000_000;
    keySet = new JwksKeySet(
      { url, cacheMs: CACHE_MS, refetchIntervalMs: REFETCH_MS, timeoutMs: TIMEOUT_MS },
      () => clock,
    );
  });

  it('fetches the set once and answers known kids from memory', async () => {
    const first = await keySet.keyFor('a');
    const again = await keySet.keyFor('a');
    const other = await keySet.keyFor('b');

    expect(first.kid).toBe('a');
    expect(first.key.asymmetricKeyType).toBe('ed25519');
    expect(again).toBe(first);
    expect(other.kid).toBe('b');
    expect(provider.fetches).toBe(1);
  });

  it('refuses an unknown kid after fetching, and fetches no more than once an interval for unknown kids', async () => {
    await keySet.keyFor('a');

    await expect(keySet.keyFor('made-up-1')).rejects.toBeInstanceOf(SigningKeyNotFoundError);
    await expect(keySet.keyFor('made-up-2')).rejects.toBeInstanceOf(SigningKeyNotFoundError);
    expect(provider.fetches).toBe(1);

    clock += REFETCH_MS;
    await expect(keySet.keyFor('made-up-3')).rejects.toBeInstanceOf(SigningKeyNotFoundError);
    expect(provider.fetches).toBe(2);
  });

  it('lets concurrent lookups of a new kid share one fetch', async () => {
    const keys = await Promise.all(Array.from({ length: 20 }, () => keySet.keyFor('b')));

    expect(new Set(keys.map((key) => key.kid))).toEqual(new Set(['b']));
    expect(provider.fetches).toBe(1);
  });

  it('finds a rotated-in key once the interval has passed, and drops a removed one with that fetch', async () => {
    await keySet.keyFor('a');
    provider.keys = [publicJwk('b'), publicJwk('c')];

    clock += REFETCH_MS;
    expect((await keySet.keyFor('c')).kid).toBe('c');
    await expect(keySet.keyFor('a')).rejects.toBeInstanceOf(SigningKeyNotFoundError);
  });

  it('refreshes a set past its cache age in the background, answering from the old set meanwhile', async () => {
    await keySet.keyFor('a');
    provider.keys = [publicJwk('b')];
    clock += CACHE_MS;

    expect((await keySet.keyFor('a')).kid).toBe('a');
    await waitUntil(() =>
      keySet.keyFor('a').then(
        () => false,
        () => true,
      ),
    );
    await expect(keySet.keyFor('a')).rejects.toBeInstanceOf(SigningKeyNotFoundError);
    expect(provider.fetches).toBe(2);
  });

  it('keeps answering known kids while the provider fails, and says the provider is unavailable for others', async () => {
    await keySet.keyFor('a');
    provider.mode = 'fail';
    clock += CACHE_MS;

    expect((await keySet.keyFor('a')).kid).toBe('a');
    // The background fetch failed, or is failing: within the interval the failure stands without another fetch.
    await expect(keySet.keyFor('new')).rejects.toBeInstanceOf(IdentityProviderUnavailableError);
    await expect(keySet.keyFor('newer')).rejects.toBeInstanceOf(IdentityProviderUnavailableError);
    expect(provider.fetches).toBe(2);

    clock += REFETCH_MS;
    await expect(keySet.keyFor('newest')).rejects.toBeInstanceOf(IdentityProviderUnavailableError);
    expect(provider.fetches).toBe(3);
    expect((await keySet.keyFor('b')).kid).toBe('b');
  });

  it('gives up on a provider that does not answer within the timeout', async () => {
    provider.mode = 'hang';
    const impatient = new JwksKeySet(
      { url, cacheMs: CACHE_MS, refetchIntervalMs: REFETCH_MS, timeoutMs: SHORT_TIMEOUT_MS },
      () => clock,
    );
    const started = Date.now();

    await expect(impatient.keyFor('a')).rejects.toBeInstanceOf(IdentityProviderUnavailableError);
    expect(Date.now() - started).toBeLessThan(SHORT_TIMEOUT_MS + 2_000);
  });

  it('says the provider is unavailable when nothing listens', async () => {
    const closed = new FakeProvider();
    const closedUrl = await closed.start();
    await closed.stop();
    const nowhere = new JwksKeySet({
      url: closedUrl,
      cacheMs: CACHE_MS,
      refetchIntervalMs: REFETCH_MS,
      timeoutMs: 1_000,
    });

    await expect(nowhere.keyFor('a')).rejects.toBeInstanceOf(IdentityProviderUnavailableError);
  });

  it('takes the only key of a one-key set for a token without kid, and none of a larger set', async () => {
    await expect(keySet.keyFor(undefined)).rejects.toBeInstanceOf(SigningKeyNotFoundError);

    provider.keys = [publicJwk('only')];
    clock += REFETCH_MS;
    await keySet.keyFor('only');
    expect((await keySet.keyFor(undefined)).kid).toBe('only');
  });
});

async function waitUntil(condition: () => Promise<boolean>): Promise<void> {
  const giveUpAt = Date.now() + 5_000;
  while (!(await condition())) {
    if (Date.now() > giveUpAt) throw new Error('condition not met within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
