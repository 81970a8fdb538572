import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Browser, BrowserContext, chromium, Page } from 'playwright-core';
import { Database } from '../../src/database/database';
import { CONSOLE_DIR, CONSOLE_SOURCE_DIR } from '../../src/console/console-paths';
import { HistoryRecorder } from '../../src/history/history-recorder';
import { randomHex } from '../support/tenant-fixture';
import { createTestApp, newTenant } from '../support/test-app';
import { hsToken, TEST_JWT_SECRET } from '../support/tokens';

/**
 * The console in a real browser against a broker with auth on and two
 * tenants. Debian's Chromium is the browser (.ci/run installs it); without it
 * the suite is skipped, unless CONSOLE_BROWSER_REQUIRED says it must run.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const hasBrowser = existsSync(CHROMIUM);
if (!hasBrowser && process.env.CONSOLE_BROWSER_REQUIRED === '1') {
  throw new Error(`CONSOLE_BROWSER_REQUIRED is set but there is no browser at ${CHROMIUM}`);
}
const describeWithBrowser = hasBrowser ? describe : describe.skip;
const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS_DIR;

// Waits are for events in the page, bounded generously for a loaded machine.
const UI_TIMEOUT_MS = 20_000;
jest.setTimeout(120_000);

describeWithBrowser('web console', () => {
  let app: NestExpressApplication;
  let base: string;
  let browser: Browser;
  const tenantA = newTenant();
  const tenantB = newTenant();
  const queueA = `orders-${randomHex(4)}`;
  const queueB = `invoices-${randomHex(4)}`;
  // Sorts after queueA by name, so only its lag can put it first.
  const behindA = `webhooks-${randomHex(4)}`;
  const token = (tenant: string, role: string) => hsToken({ tenant, role, sub: `${role}-user` }, { expiresIn: '1h' });

  async function api(method: string, path: string, bearer: string, body?: unknown): Promise<any> {
    const response = await fetch(`${base}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok && response.status !== 204) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }

  async function signIn(
    bearer: string,
    viewport = { width: 1280, height: 800 },
    timezoneId?: string,
  ): Promise<{ page: Page; context: BrowserContext }> {
    const context = await browser.newContext({ viewport, timezoneId });
    const page = await context.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    await page.goto(`${base}/console/`);
    await page.getByLabel('Token').fill(bearer);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('tenant').waitFor();
    return { page, context };
  }

  beforeAll(async () => {
    expect(staleConsoleSources()).toEqual([]);
    app = await createTestApp({ JWT_ENABLED: 'true', JWT_SECRET: TEST_JWT_SECRET, TENANT_HEADER: undefined });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
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
      ],
    });
    const writerA = token(tenantA, 'read-write');
    await api('POST', '/configure', writerA, { queue: queueA, options: { retryLimit: 1, leaseTime: 120 } });
    await api('POST', '/push', writerA, {
      items: [1, 2, 3].map((n) => ({
        queue: queueA,
        partition: `customer-${n}`,
        payload: { orderId: n, total: n * 9.5 },
      })),
    });
    await api('POST', '/push', writerA, {
      items: Array.from({ length: 12 }, (_, n) => ({ queue: behindA, payload: { to: `user${n}@example.com` } })),
    });
    // A group that took one message and left the rest: the queue behind.
    await api('GET', `/pop/queue/${behindA}?consumerGroup=mailer&autoAck=true&batch=1`, writerA);
    await api('POST', '/push', token(tenantB, 'read-write'), { items: [{ queue: queueB, payload: { invoice: 1 } }] });
    if (SCREENSHOTS) await seedHistory(app.get(Database), tenantA, [queueA, behindA]);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it('signs each tenant in to its own queues, and keeps the token out of URLs and local storage', async () => {
    for (const [tenant, own, other] of [
      [tenantA, queueA, queueB],
      [tenantB, queueB, queueA],
    ]) {
      const bearer = token(tenant, 'read-only');
      const { page, context } = await signIn(bearer);
      await expectText(page.getByTestId('tenant'), tenant);
      await expectText(page.getByTestId('roles'), 'read-only');
      await page.getByRole('link', { name: own, exact: true }).waitFor();
      expect(await page.getByRole('link', { name: other, exact: true }).count()).toBe(0);
      expect(page.url()).not.toContain(bearer.slice(-20));
      const stored = await page.evaluate(() => {
        const window = globalThis as any;
        return { session: Object.values(window.sessionStorage), local: Object.values(window.localStorage) };
      });
      expect(stored.session).toContain(bearer);
      expect(stored.local.join('')).not.toContain(bearer.slice(-20));
      await context.close();
    }
  });

  it('shows what the tenant stores and has against each of its quotas, and follows it as it changes', async () => {
    const { page, context } = await signIn(token(tenantB, 'read-only'));
    const quota = (name: string) => page.locator(`ul.quotas li[data-quota="${name}"]`);

    await expectText(quota('storedMessages'), '1 of 10,000,000');
    await expectText(quota('storedBytes'), '13 bytes of 10 GiB');
    await expectText(quota('queues'), '1 of 1,000');
    await expectText(quota('partitions'), '1 of 100,000');
    await expectText(quota('consumerGroups'), '0 of 1,000');
    expect(await quota('storedBytes').textContent()).toContain('TENANT_MAX_STORED_BYTES');

    await api('POST', '/push', token(tenantB, 'write-only'), { items: [{ queue: queueB, payload: 'x'.repeat(2046) }] });
    await expectText(quota('storedMessages'), '2 of 10,000,000');
    await expectText(quota('storedBytes'), '2.0 KiB of 10 GiB');
    await context.close();
  });

  it('puts the queue most behind first, and draws throughput from its own samples', async () => {
    const { page, context } = await signIn(token(tenantA, 'admin'));
    const rows = page.locator('table.queues tbody tr');
    await rows.first().waitFor();
    expect(await rows.first().getAttribute('data-queue')).toBe(behindA);
    await expectText(page.locator('.lagging li').first(), 'mailer');

    const writer = token(tenantA, 'read-write');
    let pushing = true;
    const pusher = (async () => {
      for (let n = 0; pushing; n++) {
        await api('POST', '/push', writer, { items: [{ queue: queueA, partition: 'customer-9', payload: { n } }] });
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    try {
      const row = page.locator(`tr[data-queue="${queueA}"]`);
      await row.getByRole('img', { name: `${queueA}: messages in per second` }).waitFor();
      await expectText(row, '/s in');
      await expect(waitUntil(async () => /[1-9][\d.]*\/s in/.test((await row.textContent()) ?? ''))).resolves.toBe(
        true,
      );
      if (SCREENSHOTS) await screenshot(page, 'console-overview.png');
    } finally {
      pushing = false;
      await pusher;
    }
    await context.close();
  });

  it("reads a queue's partitions from the broker a page at a time, forward and back", async () => {
    const wide = `wide-${randomHex(4)}`;
    const writer = token(tenantB, 'read-write');
    await api('POST', '/push', writer, {
      items: Array.from({ length: 120 }, (_, n) => ({
        queue: wide,
        partition: `c${String(n).padStart(3, '0')}`,
        payload: n,
      })),
    });
    const { page, context } = await signIn(token(tenantB, 'read-only'));
    const asked: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes(`/resources/queues/${wide}?`)) asked.push(new URL(request.url()).search);
    });
    await page.goto(`${base}/console/#/queues/${wide}/partitions`);
    const rows = page.locator('section[aria-labelledby="partitions-title"] tbody th');
    const pager = page.getByRole('navigation', { name: 'Partition pages' });

    await expectText(pager, 'Page 1 of 3');
    expect(await rows.allTextContents()).toEqual(
      Array.from({ length: 50 }, (_, n) => `c${String(n).padStart(3, '0')}`),
    );
    await pager.getByRole('button', { name: 'Next →' }).click();
    await pager.getByRole('button', { name: 'Next →' }).click();
    await expectText(pager, 'Page 3 of 3');
    await expectText(rows.first(), 'c100');
    expect(await rows.allTextContents()).toEqual(Array.from({ length: 20 }, (_, n) => `c${100 + n}`));
    await pager.getByRole('button', { name: '← Previous' }).click();
    await expectText(rows.first(), 'c050');

    // Each page was asked of the broker by itself: 50 partitions after the last of the page before.
    expect(asked).toEqual(expect.arrayContaining(['?limit=50', '?limit=50&after=c049', '?limit=50&after=c099']));
    await context.close();
  });

  it('draws the last hour, day and week the broker kept, on the queue page and the overview, at phone width too', async () => {
    const kept = `kept-${randomHex(4)}`;
    const writer = token(tenantB, 'read-write');
    await api('POST', '/push', writer, {
      items: Array.from({ length: 7 }, (_, n) => ({ queue: kept, partition: `p${n % 2}`, payload: n })),
    });
    await api('GET', `/pop/queue/${kept}?autoAck=true&batch=3&partitions=1`, writer);
    await app.get(HistoryRecorder).flush();

    for (const viewport of [undefined, { width: 390, height: 844 }]) {
      const { page, context } = await signIn(token(tenantB, 'read-only'), viewport);
      const asked: string[] = [];
      page.on('request', (request) => {
        if (request.url().includes('/history')) asked.push(new URL(request.url()).search);
      });
      await page.goto(`${base}/console/#/queues/${kept}/partitions`);
      const panel = page.locator('section.history');
      await expectText(panel.getByTestId('history-totals'), '7 in · 3 out · 3 acked · 0 dead-lettered');
      const charts = panel.locator('figure.chart');
      expect(await charts.count()).toBe(2);
      expect(await charts.first().getByRole('img').getAttribute('aria-label')).toContain('in: highest 7');
      expect(await charts.nth(1).getByRole('img').getAttribute('aria-label')).toContain('waiting: highest 4');
      await charts.first().locator('canvas').waitFor();

      await panel.getByRole('button', { name: 'Last week' }).click();
      await page.locator('section.history[data-range="week"]').getByTestId('history-totals').waitFor();
      await expectText(panel.getByTestId('history-totals'), '7 in · 3 out');
      expect(asked).toEqual(expect.arrayContaining(['?range=hour', '?range=week']));
      expect(await panel.getByRole('button', { name: 'Last week' }).getAttribute('aria-pressed')).toBe('true');

      // Nothing of the panel leaves the screen sideways.
      const overflow = await panel.evaluate((element: any) => {
        const window = globalThis as any;
        return [...element.querySelectorAll('figure, canvas, .history-head')]
          .map((child: any) => child.getBoundingClientRect())
          .filter((box: any) => box.left < 0 || box.right > window.innerWidth + 0.5).length;
      });
      expect(overflow).toBe(0);

      await page.goto(`${base}/console/#/`);
      const totals = page.locator('section.history').getByTestId('history-totals');
      await totals.waitFor();
      expect(Number((await totals.textContent())!.split(' in')[0].replace(/,/g, ''))).toBeGreaterThanOrEqual(7);
      expect(await page.locator('section.history figure.chart').count()).toBe(2);
      await context.close();
    }
  });

  it("shows a live lease's time left falling, and jumping after an extend", async () => {
    const worker = token(tenantA, 'read-write');
    const popped = await api(
      'GET',
      `/pop/queue/${queueA}/partition/customer-1?consumerGroup=billing&leaseSeconds=120`,
      worker,
    );
    const { page, context } = await signIn(token(tenantA, 'read-only'));
    await page.goto(`${base}/console/#/queues/${queueA}/consumers`);
    const row = page.locator('tr[data-lease]', { hasText: 'customer-1' });
    const timeLeft = row.getByTestId('time-left');
    await timeLeft.waitFor();
    const first = await msOf(timeLeft);
    expect(first).toBeGreaterThan(60_000);
    expect(first).toBeLessThanOrEqual(120_000);
    await expect(waitUntil(async () => (await msOf(timeLeft)) < first - 500)).resolves.toBe(true);
    await expectText(row.getByTestId('renewals'), '0');

    const extended = await api('POST', `/lease/${popped.leaseId}/extend`, worker, { seconds: 900 });
    expect(extended.renewed).toBe(1);
    await expect(waitUntil(async () => (await msOf(timeLeft)) > 600_000)).resolves.toBe(true);
    await expectText(row.getByTestId('renewals'), '1');
    expect(await row.textContent()).not.toContain(popped.leaseId);
    expect(await row.textContent()).toContain(popped.leaseId.slice(-4));
    if (SCREENSHOTS) await screenshot(page, 'console-leases.png');
    await context.close();
  });

  it('lists a message nacked past its retries as a dead letter, and retrying it delivers it again', async () => {
    const worker = token(tenantA, 'read-write');
    let transactionId = '';
    for (let attempt = 0; attempt < 2; attempt++) {
      const popped = await api('GET', `/pop/queue/${queueA}/partition/customer-2?consumerGroup=billing`, worker);
      transactionId = popped.messages[0].transactionId;
      const [ack] = await api('POST', '/ack', worker, {
        transactionId,
        partitionId: popped.partitionId,
        leaseId: popped.leaseId,
        consumerGroup: 'billing',
        status: 'failed',
        error: 'card declined',
      });
      expect(ack.dlq).toBe(attempt === 1);
    }

    const { page, context } = await signIn(worker);
    await page.goto(`${base}/console/#/queues/${queueA}/dead-letters`);
    const row = page.locator(`tr[data-transaction="${transactionId}"]`);
    await expectText(row, 'card declined');
    await row.getByRole('button', { name: 'Retry' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Retry' }).click();
    await row.waitFor({ state: 'detached' });

    const again = await api('GET', `/pop/queue/${queueA}/partition/customer-2?consumerGroup=billing`, worker);
    expect(again.messages.map((message: { transactionId: string }) => message.transactionId)).toEqual([
      `dlq:${transactionId}`,
    ]);
    await context.close();
  });

  it('gives a read-only token no retry button, and the API refuses its forged retry', async () => {
    const writer = token(tenantA, 'read-write');
    const popped = await api('GET', `/pop/queue/${queueA}/partition/customer-3?consumerGroup=audit`, writer);
    const transactionId = popped.messages[0].transactionId;
    for (let attempt = 0; attempt < 2; attempt++) {
      const lease =
        attempt === 0
          ? popped
          : await api('GET', `/pop/queue/${queueA}/partition/customer-3?consumerGroup=audit`, writer);
      await api('POST', '/ack', writer, {
        transactionId,
        partitionId: lease.partitionId,
        leaseId: lease.leaseId,
        consumerGroup: 'audit',
        status: 'failed',
        error: 'schema mismatch',
      });
    }

    const { page, context } = await signIn(token(tenantA, 'read-only'));
    await page.goto(`${base}/console/#/queues/${queueA}/dead-letters`);
    const row = page.locator(`tr[data-transaction="${transactionId}"]`);
    await expectText(row, 'schema mismatch');
    expect(await row.getByRole('button').count()).toBe(0);
    expect(await page.getByRole('link', { name: 'Settings' }).count()).toBe(0);
    await page.goto(`${base}/console/#/queues/${queueA}/consumers`);
    await page.getByRole('heading', { name: 'Consumer groups' }).waitFor();
    expect(await page.getByRole('button', { name: 'To end' }).count()).toBe(0);

    const forged = await page.evaluate(
      async ({ partitionId, transactionId }) => {
        const bearer = String(Object.values((globalThis as any).sessionStorage)[0]);
        const response = await fetch(
          `/api/v1/messages/${partitionId}/${encodeURIComponent(transactionId)}/retry?consumerGroup=audit`,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${bearer}` },
          },
        );
        return { status: response.status, body: await response.json() };
      },
      { partitionId: popped.partitionId, transactionId },
    );
    expect(forged).toEqual({ status: 403, body: { error: 'Insufficient permissions' } });
    const letters = await api('GET', `/dlq?queue=${queueA}&consumerGroup=audit`, writer);
    expect(letters.messages.map((letter: { transactionId: string }) => letter.transactionId)).toEqual([transactionId]);
    await context.close();
  });

  it('signs a refused token out with the reason, and lays the queue out on a phone without page-wide scrolling', async () => {
    const { page, context } = await signIn(token(tenantA, 'read-only'), { width: 390, height: 800 });
    await page.goto(`${base}/console/#/queues/${queueA}/consumers`);
    await page.getByRole('heading', { name: 'Live leases' }).waitFor();
    const overflow = await page.evaluate(() => {
      const root = (globalThis as any).document.documentElement;
      return root.scrollWidth - root.clientWidth;
    });
    expect(overflow).toBeLessThanOrEqual(0);
    await context.close();

    const expired = hsToken({ tenant: tenantA, role: 'read-only' }, { expiresIn: -3_600 });
    const fresh = await browser.newContext();
    const signInPage = await fresh.newPage();
    await signInPage.goto(`${base}/console/`);
    await signInPage.getByLabel('Token').fill(expired);
    await signInPage.getByRole('button', { name: 'Sign in' }).click();
    await expectText(signInPage.getByRole('alert'), 'Token expired');
    expect(await signInPage.evaluate(() => (globalThis as any).sessionStorage.length)).toBe(0);
    await fresh.close();
  });

  it('refreshes in one cycle, and stops asking while the tab is hidden', async () => {
    const { page, context } = await signIn(token(tenantA, 'read-only'));
    await page.locator('table.queues').waitFor();
    const requests: number[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/api/v1/')) requests.push(Date.now());
    });
    const watchMs = 6_000;
    await page.waitForTimeout(watchMs);
    // Three routes a cycle, one cycle every two seconds at most: a storm would be far above this.
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.length).toBeLessThanOrEqual(3 * (watchMs / 2_000 + 1));

    await page.evaluate(() => {
      const document = (globalThis as any).document;
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
      document.dispatchEvent(new Event('visibilitychange'));
    });
    requests.length = 0;
    await page.waitForTimeout(watchMs);
    expect(requests.length).toBe(0);
    await context.close();
  });

  it('can be used from the keyboard: skip link, links, a confirmation closed with Escape', async () => {
    const { page, context } = await signIn(token(tenantA, 'read-write'));
    await page.reload();
    await page.locator('table.queues').waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => (globalThis as any).document.activeElement.textContent)).toBe('Skip to content');
    await page.getByRole('link', { name: behindA, exact: true }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: behindA, level: 1 }).waitFor();
    await page.getByRole('button', { name: 'To end' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    const lag = await api('GET', `/consumer-groups?queue=${behindA}`, token(tenantA, 'read-only'));
    expect(lag[0].totalLag).toBe(11);
    await context.close();
  });

  it("shows a message's traces as a timeline, oldest first: type, group, names and data", async () => {
    const writer = token(tenantA, 'read-write');
    const tracedQ = `traced-${randomHex(4)}`;
    await api('POST', '/push', writer, {
      items: [{ queue: tracedQ, payload: { orderId: 7 }, transactionId: 'order-7' }],
    });
    const { partitionId } = await api('GET', `/pop/queue/${tracedQ}?autoAck=true`, writer);
    const traced = { partitionId, transactionId: 'order-7' };
    await api('POST', '/traces', writer, { ...traced, data: { text: 'reserved stock' }, traceNames: ['order-7'] });
    await api('POST', '/traces', writer, {
      ...traced,
      data: { text: 'charged the card' },
      eventType: 'processing',
      consumerGroup: 'billing',
    });
    const { page, context } = await signIn(token(tenantA, 'read-only'));

    await page.goto(`${base}/console/#/queues/${tracedQ}/messages/${partitionId}/order-7`);
    const entries = page.locator('section[aria-labelledby="traces-title"] ol.timeline li');
    await expectText(entries.nth(1), 'charged the card');

    expect(await entries.count()).toBe(2);
    const [first, second] = [await entries.nth(0).innerText(), await entries.nth(1).innerText()];
    for (const text of ['info', 'queue mode (default)', 'order-7', 'reserved stock']) expect(first).toContain(text);
    for (const text of ['processing', 'billing', 'charged the card']) expect(second).toContain(text);
    await context.close();
  });

  describe('confirmation dialogs', () => {
    // A queue whose default (queue-mode) group has a dead letter: every row dialog has something to act on.
    const dialogsQ = `dialogs-${randomHex(4)}`;
    let transactionId = '';
    let partitionId = '';

    beforeAll(async () => {
      const writer = token(tenantA, 'read-write');
      await api('POST', '/configure', writer, { queue: dialogsQ, options: { retryLimit: 1, leaseTime: 120 } });
      await api('POST', '/push', writer, {
        items: [{ queue: dialogsQ, partition: 'eu-west', payload: { order: 'a-long-enough-payload' } }],
      });
      for (let attempt = 0; attempt < 2; attempt++) {
        const popped = await api('GET', `/pop/queue/${dialogsQ}/partition/eu-west`, writer);
        transactionId = popped.messages[0].transactionId;
        partitionId = popped.partitionId;
        await api('POST', '/ack', writer, {
          transactionId,
          partitionId,
          leaseId: popped.leaseId,
          status: 'failed',
          error: 'downstream refused the order',
        });
      }
    });

    const VIEWPORTS = [
      { width: 1280, height: 800 },
      { width: 390, height: 844 },
    ];

    for (const viewport of VIEWPORTS) {
      it(`shows every dialog's text in full at ${viewport.width}×${viewport.height}`, async () => {
        const { page, context } = await signIn(token(tenantA, 'admin'), viewport);
        const opened: string[] = [];
        const check = async (opener: ReturnType<Page['locator']>, name: string) => {
          await opener.click();
          const dialog = page.locator('dialog[open]');
          await dialog.waitFor();
          expect({ dialog: name, hidden: await hiddenText(dialog) }).toEqual({ dialog: name, hidden: [] });
          await page.keyboard.press('Escape');
          await dialog.waitFor({ state: 'detached' });
          opened.push(name);
        };

        await page.goto(`${base}/console/#/queues/${dialogsQ}/dead-letters`);
        const letter = page.locator(`tr[data-transaction="${transactionId}"]`);
        await expectText(letter, 'queue mode (default)');
        await check(letter.getByRole('button', { name: 'Retry', exact: true }), 'dead letter: Retry');
        await check(letter.getByRole('button', { name: 'Delete', exact: true }), 'dead letter: Delete');
        expect(await mainText(page)).not.toContain('__QUEUE_MODE__');

        await page.goto(`${base}/console/#/queues/${dialogsQ}/messages/${partitionId}/${transactionId}`);
        const onMessage = page.locator('section[aria-labelledby="letters-title"] tbody tr').first();
        await expectText(onMessage, 'queue mode (default)');
        await check(onMessage.getByRole('button', { name: 'Retry', exact: true }), 'message: Retry');
        await check(onMessage.getByRole('button', { name: 'Delete', exact: true }), 'message: Delete');
        expect(await mainText(page)).not.toContain('__QUEUE_MODE__');

        await page.goto(`${base}/console/#/queues/${dialogsQ}/consumers`);
        const group = page.locator('tr[data-group="__QUEUE_MODE__"]');
        await expectText(group, 'queue mode (default)');
        await check(group.getByRole('button', { name: 'To end', exact: true }), 'seek: To end');
        await check(group.getByRole('button', { name: 'To time…', exact: true }), 'seek: To time');
        expect(await mainText(page)).not.toContain('__QUEUE_MODE__');

        await page.goto(`${base}/console/#/queues/${dialogsQ}/messages`);
        await expectText(page.locator('select[name="consumerGroup"]'), 'queue mode (default)');
        expect(await mainText(page)).not.toContain('__QUEUE_MODE__');

        await page.goto(`${base}/console/#/queues/${dialogsQ}/settings`);
        await expectText(page.getByTestId('settings-idle'), 'Apply');
        await page.getByLabel('Lease time (s)').fill('0');
        await expectText(page.getByRole('alert'), 'at least 1');
        expect(await page.getByRole('button', { name: 'Apply' }).count()).toBe(0);
        await page.getByLabel('Lease time (s)').fill('30');
        await check(page.getByRole('button', { name: 'Apply', exact: true }), 'settings: Apply');

        expect(opened).toHaveLength(7);
        await context.close();
      });
    }

    it('names the time zone a seek time is read in, and seeks to that instant', async () => {
      // Half an hour off UTC, and a name Chromium does not rewrite to an alias (as it does Asia/Kolkata).
      const { page, context } = await signIn(token(tenantA, 'read-write'), undefined, 'America/St_Johns');
      await page.goto(`${base}/console/#/queues/${dialogsQ}/messages`);
      await expectText(page.getByTestId('time-zone'), 'America/St_Johns (UTC-03:30)');

      await page.goto(`${base}/console/#/queues/${dialogsQ}/consumers`);
      await page.locator('tr[data-group="__QUEUE_MODE__"]').getByRole('button', { name: 'To time…' }).click();
      const dialog = page.locator('dialog[open]');
      await dialog.locator('input[type="datetime-local"]').fill('2026-01-02T03:04:05');
      await expectText(dialog.getByTestId('time-zone'), 'America/St_Johns (UTC-03:30): 2026-01-02T06:34:05Z in UTC');
      const seek = page.waitForRequest((request) => request.url().endsWith('/seek'));
      await dialog.getByRole('button', { name: 'Seek' }).click();
      expect((await seek).postDataJSON()).toEqual({ timestamp: '2026-01-02T06:34:05.000Z' });
      await dialog.waitFor({ state: 'detached' });
      await context.close();
    });

    it('retries a default-group dead letter from its dialog under the raw group name', async () => {
      const { page, context } = await signIn(token(tenantA, 'read-write'), { width: 390, height: 844 });
      await page.goto(`${base}/console/#/queues/${dialogsQ}/dead-letters`);
      const letter = page.locator(`tr[data-transaction="${transactionId}"]`);
      await letter.getByRole('button', { name: 'Retry', exact: true }).click();
      const retried = page.waitForResponse((response) => response.url().includes('/retry?'));
      await page.locator('dialog[open]').getByRole('button', { name: 'Retry' }).click();
      const response = await retried;
      expect(response.status()).toBeLessThan(300);
      expect(new URL(response.url()).searchParams.get('consumerGroup')).toBe('__QUEUE_MODE__');
      await letter.waitFor({ state: 'detached' });
      await context.close();
    });
  });

  /**
   * An hour of history for the screenshots: the test cannot wait an hour for the broker to write one, so the
   * buckets it would have written are made here, shaped like a queue that fell behind and caught up.
   */
  async function seedHistory(dataSource: Database, tenant: string, queues: string[]): Promise<void> {
    for (const [index, queue] of queues.entries()) {
      await dataSource.query(
        `INSERT INTO queue_history (tenant_id, queue_id, minute, pushed, popped, acked, dead_lettered, max_wait_ms, lag)
         SELECT $1, q.id, date_trunc('minute', now()) - make_interval(mins => m),
                p.pushed, p.popped, p.popped, (m % 17 = 3)::int, 200 + 1000 * greatest(0, 25 - abs(m - 30)), p.lag
           FROM queues q, generate_series(1, 59) m,
                LATERAL (SELECT (60 + 25 * sin(m / 6.0) + 40 * $3)::int AS pushed,
                                (CASE WHEN m BETWEEN 22 AND 36 THEN 20 ELSE 75 END + 40 * $3)::int AS popped,
                                (greatest(0, 400 - 18 * abs(m - 22)) * (1 - $3))::int AS lag) p
          WHERE q.tenant_id = $1 AND q.name = $2
         ON CONFLICT DO NOTHING`,
        [tenant, queue, index],
      );
    }
    await dataSource.query(
      `INSERT INTO tenant_history (tenant_id, minute, pushed, popped, acked, dead_lettered, max_wait_ms)
       SELECT tenant_id, minute, sum(pushed), sum(popped), sum(acked), sum(dead_lettered), max(max_wait_ms)
         FROM queue_history WHERE tenant_id = $1 GROUP BY tenant_id, minute
       ON CONFLICT DO NOTHING`,
      [tenant],
    );
  }

  async function screenshot(page: Page, name: string): Promise<void> {
    mkdirSync(SCREENSHOTS!, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS!, name), fullPage: true });
  }
});

/** Console sources changed since the last build (npm run build:console), which the browser would not see. */
function staleConsoleSources(): string[] {
  const index = join(CONSOLE_DIR, 'index.html');
  if (!existsSync(index)) return ['dist/console is not built'];
  const built = statSync(index).mtimeMs;
  const sources = CONSOLE_SOURCE_DIR;
  return readdirSync(sources, { recursive: true, encoding: 'utf8' })
    .filter((file) => statSync(join(sources, file)).isFile() && statSync(join(sources, file)).mtimeMs > built)
    .map((file) => `console/${file} is newer than the build: npm run build:console`);
}

/**
 * What of an open dialog's content cannot be seen: an element cut off sideways, or a piece of text or
 * an element lying outside the dialog or the viewport.
 */
async function hiddenText(dialog: ReturnType<Page['locator']>): Promise<string[]> {
  return dialog.evaluate((root: any) => {
    const window = globalThis as any;
    const hidden: string[] = [];
    const frame = root.getBoundingClientRect();
    const outside = (box: any) =>
      box.left < frame.left - 0.5 ||
      box.right > frame.right + 0.5 ||
      box.top < frame.top - 0.5 ||
      box.bottom > frame.bottom + 0.5 ||
      box.left < 0 ||
      box.top < 0 ||
      box.right > window.innerWidth ||
      box.bottom > window.innerHeight;
    for (const element of [root, ...root.querySelectorAll('*')]) {
      const what = `${element.tagName.toLowerCase()} "${(element.textContent ?? '').trim().slice(0, 40)}"`;
      if (element.clientWidth > 0 && element.scrollWidth > element.clientWidth) hidden.push(`${what} is cut off`);
      const box = element.getBoundingClientRect();
      if (element !== root && box.width > 0 && outside(box)) hidden.push(`${what} lies outside`);
    }
    const walker = window.document.createTreeWalker(root, window.NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      const range = window.document.createRange();
      range.selectNodeContents(node);
      for (const box of range.getClientRects()) {
        if (outside(box)) hidden.push(`text "${node.textContent.trim().slice(0, 40)}" lies outside`);
      }
    }
    return [...new Set(hidden)];
  });
}

async function mainText(page: Page): Promise<string> {
  return page.locator('main').innerText();
}

async function msOf(locator: ReturnType<Page['locator']>): Promise<number> {
  return Number(await locator.getAttribute('data-ms'));
}

async function expectText(locator: ReturnType<Page['locator']>, text: string): Promise<void> {
  await locator.filter({ hasText: text }).first().waitFor({ timeout: UI_TIMEOUT_MS });
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs = UI_TIMEOUT_MS): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}
