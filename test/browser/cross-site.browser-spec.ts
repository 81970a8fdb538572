import { existsSync } from 'node:fs';
import { createServer, IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Browser, chromium, Page } from 'playwright-core';
import { randomHex } from '../support/tenant-fixture';
import { createTestApp } from '../support/test-app';

/**
 * Pages of other sites against a broker with auth off, in Debian's Chromium, which decides what a page may send and
 * which headers say where it came from. The broker is http://localhost:<port>; the pages are served from
 * http://127.0.0.1:<port> (another site) and http://localhost:<other port> (the same site, another origin). Without
 * the browser the suite is skipped, unless CONSOLE_BROWSER_REQUIRED says it must run.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const hasBrowser = existsSync(CHROMIUM);
if (!hasBrowser && process.env.CONSOLE_BROWSER_REQUIRED === '1') {
  throw new Error(`CONSOLE_BROWSER_REQUIRED is set but there is no browser at ${CHROMIUM}`);
}
const describeWithBrowser = hasBrowser ? describe : describe.skip;

const UI_TIMEOUT_MS = 20_000;
const PLAIN_BROKER = 'broker.test';
const PLAIN_ATTACKER = 'attacker.test';
jest.setTimeout(120_000);

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  status: number;
}

describeWithBrowser('requests from pages of other sites, in Chromium', () => {
  let app: NestExpressApplication;
  let browser: Browser;
  let brokerPort: number;
  let broker: string;
  /** Another site: a page on another host. */
  let attacker: PageServer;
  /** The same site (localhost), another origin (port): a sibling. */
  let sibling: PageServer;
  /** Another site the operator allows (HTTP_ALLOWED_ORIGINS). */
  let partner: PageServer;
  /** Every request the broker answered, as it arrived, in order of the answers. */
  const seen: Seen[] = [];

  beforeAll(async () => {
    attacker = await servePages('127.0.0.1');
    sibling = await servePages('localhost');
    partner = await servePages('127.0.0.1');
    app = await createTestApp({ HTTP_ALLOWED_ORIGINS: partner.origin });
    const server: Server = app.getHttpServer();
    server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
      const { method = '', url = '', headers } = request;
      response.once('finish', () => seen.push({ method, url, headers, status: response.statusCode }));
    });
    await app.listen(0, '127.0.0.1');
    brokerPort = (server.address() as AddressInfo).port;
    broker = `http://localhost:${brokerPort}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        // Names that are not loopback ones, so not potentially trustworthy: no Sec-Fetch-* over plain HTTP.
        `--host-resolver-rules=MAP ${PLAIN_BROKER} 127.0.0.1, MAP ${PLAIN_ATTACKER} 127.0.0.1`,
      ],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    for (const pages of [attacker, sibling, partner]) await pages?.close();
  });

  /** What a client without a browser does: no Origin, no Sec-Fetch-*; the default tenant, as the pages act in. */
  async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const response = await fetch(`${broker}/api/v1${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }

  async function pushFive(queue: string): Promise<void> {
    const pushed = await api('POST', '/push', { items: [1, 2, 3, 4, 5].map((n) => ({ queue, payload: { n } })) });
    expect(pushed.status).toBe(201);
  }

  /** The broker's answers to the requests that match, once there are `count` of them. */
  async function answered(matches: (request: Seen) => boolean, count = 1): Promise<Seen[]> {
    const deadline = Date.now() + UI_TIMEOUT_MS;
    for (;;) {
      const matching = seen.filter(matches);
      if (matching.length >= count) return matching;
      if (Date.now() > deadline) throw new Error(`${count} requests not answered, saw ${matching.length}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  const to = (part: string) => (request: Seen) => request.url.includes(part);

  async function open(pages: PageServer, html: string): Promise<Page> {
    const page = await browser.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    await page.goto(pages.serve(html));
    return page;
  }

  it('an <img> pop with autoAck from another site is refused and consumes nothing (Sec-Fetch-Site: cross-site)', async () => {
    const queue = `img-${randomHex(4)}`;
    await pushFive(queue);
    const page = await open(attacker, `<img id="pop" src="${broker}/api/v1/pop/queue/${queue}?autoAck=true&batch=5">`);
    const [pop] = await answered(to(`/pop/queue/${queue}`));
    expect(pop.headers['sec-fetch-site']).toBe('cross-site');
    expect(pop.headers.origin).toBeUndefined();
    expect(pop.status).toBe(403);
    await page.close();

    const left = await api('GET', `/pop/queue/${queue}?batch=10`);
    expect(left.body.messages).toHaveLength(5);
  });

  it('a form POST and no-cors fetches from another site store and consume nothing', async () => {
    const queue = `form-${randomHex(4)}`;
    const pushedQueue = `${queue}-pushed`;
    await pushFive(queue);
    // text/plain forms can carry JSON: the name holds the body up to '=', the value closes it inside the payload.
    const name = `{"items":[{"queue":"${pushedQueue}","payload":{"padding":"`;
    const page = await open(
      attacker,
      `<iframe name="sink"></iframe>
       <form id="form" method="POST" enctype="text/plain" target="sink" action="${broker}/api/v1/push">
         <input type="hidden" name='${name}' value='"}}]}'>
       </form>
       <script>
         document.getElementById('form').submit();
         fetch('${broker}/api/v1/push', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' },
           body: JSON.stringify({ items: [{ queue: '${pushedQueue}', payload: { via: 'fetch' } }] }) });
         fetch('${broker}/api/v1/pop/queue/${queue}?autoAck=true&batch=5', { mode: 'no-cors' });
       </script>`,
    );
    const pushes = await answered(
      (request) => request.url === '/api/v1/push' && request.headers.origin === attacker.origin,
      2,
    );
    const [pop] = await answered(to(`/pop/queue/${queue}`));
    for (const request of [...pushes, pop]) {
      expect(request.headers['sec-fetch-site']).toBe('cross-site');
      expect(request.status).toBe(403);
    }
    expect(pushes.map((request) => request.headers['sec-fetch-mode']).sort()).toEqual(['navigate', 'no-cors']);
    expect(pushes.every((request) => request.headers.origin === attacker.origin)).toBe(true);
    await page.close();

    expect((await api('GET', `/pop/queue/${pushedQueue}`)).status).toBe(204);
    expect((await api('GET', `/pop/queue/${queue}?batch=10`)).body.messages).toHaveLength(5);
  });

  it('a page of the same site on another port is refused too (Sec-Fetch-Site: same-site)', async () => {
    const queue = `sibling-${randomHex(4)}`;
    await pushFive(queue);
    const page = await open(sibling, `<img src="${broker}/api/v1/pop/queue/${queue}?autoAck=true&batch=5">`);
    const [pop] = await answered(to(`/pop/queue/${queue}`));
    expect(pop.headers['sec-fetch-site']).toBe('same-site');
    expect(pop.status).toBe(403);
    await page.close();
    expect((await api('GET', `/pop/queue/${queue}?batch=10`)).body.messages).toHaveLength(5);
  });

  it('over plain HTTP to a name that is not loopback, where no Sec-Fetch-Site is sent, the Referer gives another site away', async () => {
    const queue = `plain-${randomHex(4)}`;
    await pushFive(queue);
    const page = await browser.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    await page.goto(
      attacker.serve(
        `<img src="http://${PLAIN_BROKER}:${brokerPort}/api/v1/pop/queue/${queue}?autoAck=true&batch=5">`,
        PLAIN_ATTACKER,
      ),
    );
    const [pop] = await answered(to(`/pop/queue/${queue}`));
    expect(pop.headers['sec-fetch-site']).toBeUndefined();
    expect(pop.headers.origin).toBeUndefined();
    expect(pop.headers.referer).toBe(`http://${PLAIN_ATTACKER}:${attacker.port}/`);
    expect(pop.status).toBe(403);
    await page.close();
    expect((await api('GET', `/pop/queue/${queue}?batch=10`)).body.messages).toHaveLength(5);
  });

  it('an allow-listed origin pushes and pops with fetch, reading the answers through CORS', async () => {
    const queue = `partner-${randomHex(4)}`;
    const page = await open(partner, '<p>partner</p>');
    const result = await page.evaluate(
      async ({ broker, queue }) => {
        const pushed = await fetch(`${broker}/api/v1/push`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ items: [{ queue, payload: { from: 'partner' } }] }),
        });
        const popped = await fetch(`${broker}/api/v1/pop/queue/${queue}?autoAck=true`);
        return {
          pushed: pushed.status,
          popped: popped.status,
          payload: ((await popped.json()) as { messages: Array<{ data: unknown }> }).messages[0].data,
          requestId: popped.headers.get('x-request-id'),
        };
      },
      { broker, queue },
    );
    expect(result).toEqual({ pushed: 201, popped: 200, payload: { from: 'partner' }, requestId: expect.any(String) });
    // The JSON push was preflighted, and the preflight answered for this origin.
    const [preflight] = await answered(
      (request) => request.method === 'OPTIONS' && request.headers.origin === partner.origin,
    );
    expect(preflight.status).toBe(204);
    await page.close();
  });

  it('Swagger UI renders under its policy, "Try it out" sends the token, and the token is not kept in local storage', async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(`${broker}/docs`);
    await page
      .getByRole('button', { name: /Authorize/ })
      .first()
      .click();
    const token = `token-${randomHex(8)}`;
    await page.getByLabel('auth-bearer-value').fill(token);
    await page.getByRole('button', { name: 'Apply credentials' }).click();
    await page.locator('.modal-ux').getByRole('button', { name: 'Close' }).click();

    const whoami = page.locator('#operations-auth-WhoAmIController_whoami');
    await whoami.locator('.opblock-summary').click();
    await whoami.getByRole('button', { name: 'Try it out' }).click();
    await whoami.getByRole('button', { name: 'Execute' }).click();
    const status = whoami.locator('.live-responses-table .response .response-col_status').first();
    await status.waitFor();
    expect(await status.innerText()).toContain('200');
    const [call] = await answered((request) => request.url === '/api/v1/whoami');
    expect(call.headers.authorization).toBe(`Bearer ${token}`);
    expect(call.headers['sec-fetch-site']).toBe('same-origin');
    expect(violations).toEqual([]);

    const stored = await page.evaluate(() => JSON.stringify({ ...(globalThis as any).localStorage }));
    expect(stored).not.toContain(token);
    await page.close();
  });
});

interface PageServer {
  origin: string;
  port: number;
  /** A URL of this origin (or of another name for the same server) that answers the given page. */
  serve(html: string, host?: string): string;
  close(): Promise<void>;
}

async function servePages(host: string): Promise<PageServer> {
  const pages = new Map<string, string>();
  const server = createServer((request, response) => {
    const html = pages.get(request.url ?? '');
    response.writeHead(html === undefined ? 404 : 200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(html ?? 'not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const origin = `http://${host}:${port}`;
  return {
    origin,
    port,
    serve(html: string, otherHost?: string): string {
      const path = `/page-${pages.size}.html`;
      pages.set(path, `<!doctype html><html><body>${html}</body></html>`);
      return `${otherHost === undefined ? origin : `http://${otherHost}:${port}`}${path}`;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
