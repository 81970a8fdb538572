/*
 * The victim of the tenant-isolation benchmark, in a process of its own so
 * that the attacker's thousands of requests in the benchmark's process do
 * not delay its measurements. It opens its connection and says "ready" on
 * stderr (a client renewing a lease has its connection already), waits for
 * the attacker to get going, then renews the lease in a loop, one request at
 * a time, and prints each answer's status, renewed count and latency as JSON.
 * It renews at most every MIN_INTERVAL_MS: half of RATE_LIMIT_RENEW's default
 * per tenant, so that on a fast machine it is not refused by its own limit.
 */
const [base, authorization, leaseId, seconds, delayMs] = process.argv.slice(2);
const MIN_INTERVAL_MS = 2;

async function renew(): Promise<{ status: number; renewed: number | undefined; ms: number }> {
  const started = performance.now();
  try {
    const response = await fetch(`${base}/api/v1/lease/${leaseId}/extend`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json' },
      body: '{"seconds":3600}',
    });
    const body = (await response.json()) as { renewed?: number };
    return { status: response.status, renewed: body.renewed, ms: performance.now() - started };
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
  process.stdout.write(JSON.stringify(answers));
}

void main();
