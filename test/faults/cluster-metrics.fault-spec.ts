import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { newTenant, onEmbeddedDatabase, TENANT_HEADER } from '../support/test-app';
import { waitFor, within } from '../support/wait';
import { BrokerProcess } from './support/broker-process';

jest.setTimeout(180_000);

const REQUESTS = 40;
const POOL_SIZE = 3;
const METRICS_TOKEN = 'cluster-metrics-token-0123456789';
const PUSHES = 'leasehold_http_request_duration_seconds_count{method="POST",route="/api/v1/push",status_class="2xx"}';

interface Answer {
  status: number;
  body: string;
}

/** One request on a connection of its own, so that successive requests reach the workers in turn. */
function call(url: string, method: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const options = { method, headers: { ...headers, connection: 'close' }, timeout: 20_000 };
    const request = httpRequest(url, options, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, body: text }));
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(new Error(`${method} ${url}: no answer`)));
    request.on('error', reject);
    request.end(body);
  });
}

/** The value of one series in Prometheus text, or undefined when it is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** A broker with two workers, and their pids, read from their "Listening on" lines. */
async function startTwoWorkers(env: Record<string, string>): Promise<{ broker: BrokerProcess; workerPids: number[] }> {
  const broker = await BrokerProcess.start({
    DATABASE_URL: process.env.DATABASE_URL,
    TENANT_HEADER,
    WORKERS: '2',
    DB_POOL_SIZE: String(POOL_SIZE),
    ...env,
  });
  const listening = (): string[] => broker.lines.filter((line) => line.includes('Listening on'));
  await waitFor(() => listening().length === 2, 'both workers listen', 60_000);
  return { broker, workerPids: listening().map((line) => (JSON.parse(line) as { pid: number }).pid) };
}

async function stopAll(broker: BrokerProcess | undefined, workerPids: number[]): Promise<void> {
  // A stopped worker ignores the primary's SIGTERM, and a killed primary leaves its workers behind.
  for (const pid of workerPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  await broker?.stop();
}

/** One message per request, each on a connection of its own; resolves to the pids of the workers that served them. */
async function pushEach(broker: BrokerProcess, queue: string, count: number): Promise<number[]> {
  const tenant = newTenant();
  for (let n = 0; n < count; n += 1) {
    const answer = await call(
      `${broker.url}/api/v1/push`,
      'POST',
      { [TENANT_HEADER]: tenant, 'content-type': 'application/json' },
      JSON.stringify({ items: [{ queue, payload: { n } }] }),
    );
    expect(answer.status).toBe(201);
  }
  // Request log lines carry the pid of the worker that wrote them.
  const servedBy = broker.lines
    .filter((line) => line.includes('"route":"/api/v1/push"'))
    .map((line) => (JSON.parse(line) as { pid: number }).pid);
  return [...new Set(servedBy)].sort();
}

(onEmbeddedDatabase ? describe.skip : describe)('GET /metrics with WORKERS=2', () => {
  let broker: BrokerProcess | undefined;
  let workerPids: number[] = [];

  beforeAll(async () => {
    ({ broker, workerPids } = await startTwoWorkers({ METRICS_TOKEN }));
  });

  afterAll(() => stopAll(broker, workerPids));

  const scrape = (): Promise<Answer> =>
    call(`${broker!.url}/metrics`, 'GET', { authorization: `Bearer ${METRICS_TOKEN}` });

  it('every scrape counts the requests of both workers, adds up their pools and does not double queue depth', async () => {
    const queue = `clustered-${randomUUID().slice(0, 8)}`;
    expect(await pushEach(broker!, queue, REQUESTS)).toEqual([...workerPids].sort());

    for (let round = 0; round < 6; round += 1) {
      const answer = await scrape();
      expect(answer.status).toBe(200);
      expect(sample(answer.body, PUSHES)).toBe(REQUESTS);
      expect(sample(answer.body, `leasehold_pushed_messages_total{queue="${queue}"}`)).toBe(REQUESTS);
      expect(sample(answer.body, `leasehold_queue_depth_messages{queue="${queue}"}`)).toBe(REQUESTS);
      expect(sample(answer.body, 'leasehold_db_pool_max')).toBe(2 * POOL_SIZE);
      expect(sample(answer.body, 'leasehold_listener_connected')).toBe(1);
      expect(sample(answer.body, 'leasehold_draining')).toBe(0);
      expect(answer.body.match(/^leasehold_process_resident_memory_bytes\{worker="\d+"\} /gm)).toHaveLength(2);
    }
  });

  it('answers 401 without the token, as one process does', async () => {
    const answer = await call(`${broker!.url}/metrics`, 'GET', {});
    expect(answer.status).toBe(401);
  });

  it('a worker that does not answer fails the scrape with 503 naming it, within the bound, and the next scrapes recover', async () => {
    const [stopped] = workerPids;
    process.kill(stopped, 'SIGSTOP');
    try {
      // A scrape handed to the stopped worker itself waits; one reaching the other worker must fail fast.
      let failed: Answer | undefined;
      await waitFor(
        async () => {
          const startedAt = performance.now();
          const answer = await scrape().catch(() => undefined);
          if (answer?.status === 503) {
            expect(performance.now() - startedAt).toBeLessThan(10_000);
            failed = answer;
          }
          return failed !== undefined;
        },
        'a scrape reaches the worker still running',
        90_000,
      );
      expect(JSON.parse(failed!.body)).toEqual({
        error: `metrics of workers ${stopped} did not arrive within 3000 ms`,
      });
    } finally {
      process.kill(stopped, 'SIGCONT');
    }
    const answer = await within(scrape(), 'a scrape once both workers run', 30_000);
    expect(answer.status).toBe(200);
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('GET /metrics on METRICS_PORT with WORKERS=2', () => {
  let broker: BrokerProcess | undefined;
  let workerPids: number[] = [];

  beforeAll(async () => {
    ({ broker, workerPids } = await startTwoWorkers({ METRICS_PORT: '0' }));
  });

  afterAll(() => stopAll(broker, workerPids));

  it('every scrape of the metrics port counts the requests of both workers', async () => {
    // The workers share the metrics port as they share the API port: one random port for both.
    const pattern = /Metrics and probes on (http:\/\/[\d.]+:\d+)/;
    const metricsUrl = pattern.exec(await within(broker!.waitForLine(pattern), 'the metrics port'))![1];
    const queue = `clustered-${randomUUID().slice(0, 8)}`;
    expect(await pushEach(broker!, queue, REQUESTS)).toEqual([...workerPids].sort());

    for (let round = 0; round < 6; round += 1) {
      const answer = await call(`${metricsUrl}/metrics`, 'GET', {});
      expect(answer.status).toBe(200);
      expect(sample(answer.body, PUSHES)).toBe(REQUESTS);
      expect(sample(answer.body, `leasehold_queue_depth_messages{queue="${queue}"}`)).toBe(REQUESTS);
    }
  });
});
