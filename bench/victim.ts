/*
 * The victim of the tenant-isolation benchmark, in a process of its own so
 * that the attacker's thousands of requests in the benchmark's process do
 * not delay its measurements. It opens its connection and says "ready" on
 * stderr (a client renewing a lease has its connection already: it keeps
 * that one, where fetch would open another whenever the last answer's
 * connection was not yet handed back to its pool), waits for
 * the attacker to get going, then renews the lease in a loop, one request at
 * a time, and prints each answer's status, renewed count and latency as JSON.
 * It renews at most every MIN_INTERVAL_MS: half of RATE_LIMIT_RENEW's default
 * per tenant, so that on a fast machine it is not refused by its own limit.
 */
import { Agent, request } from 'node:http';

const [base, authorization, leaseId, seconds, delayMs] = process.argv.slice(2);
const MIN_INTERVAL_MS = 2;
const BODY = '{"seconds":3600}';
const connection = new Agent({ keepAlive: true, maxSockets: 1 });

async function renew(): Promise<{ status: number; renewed: number | undefined; ms: number }> {
  const started = performance.now();
  try {
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const outgoing = request(
        `${base}/api/v1/lease/${leaseId}/extend`,
        {
          method: 'POST',
          agent: connection,
          headers: { authorization, 'content-type': 'application/json', 'content-length': BODY.length },
        },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
          response.on('error', reject);
        },
      );
      outgoing.on('error', reject);
      outgoing.end(BODY);
    });
    const body = JSON.parse(text) as { renewed?: number };
    return { status, renewed: body.renewed, ms: performance.now() - started };
  } catch {
    return { status: 0, renewed: undefined, ms: performance.now() - started };
  }
}

async function main(): Promise<void> {
  await renew();
  process.stderr.write('ready\n');
  await new Promise((resolve) => setTimeout(resolve, Number(delayMs)));
  const answers: Array<{ status: number; renewed: number | undefined; ms: number }> = [];
  const until = performance.now() + Number(seconds) * 1000;
  while (performance.now() < until) {
    const next = performance.now() + MIN_INTERVAL_MS;
    answers.push(await renew());
    const early = next - performance.now();
    if (early > 0) await new Promise((resolve) => setTimeout(resolve, early));
  }
  connection.destroy();
  process.stdout.write(JSON.stringify(answers));
}

void main();
