import { call } from './http';

async function push(base: string, queue: string, items: Array<{ partition: string; payload: unknown }>): Promise<void> {
  const response = await call(base, 'POST', '/api/v1/push', { items: items.map((item) => ({ queue, ...item })) });
  if (response.status !== 201) throw new Error(`push answered ${response.status}`);
}

/** One message in each of `count / 2` partitions, popped by two consumer groups: `count` single-partition leases. */
export async function createLeases(base: string, count: number): Promise<string[]> {
  const partitions = Math.ceil(count / 2);
  for (let start = 0; start < partitions; start += 500) {
    const items = [];
    for (let index = start; index < Math.min(partitions, start + 500); index += 1) {
      items.push({ partition: `p${index}`, payload: { index } });
    }
    await push(base, 'bench-leases', items);
  }
  const leases: string[] = [];
  for (const group of ['bench-a', 'bench-b']) {
    const workers = Array.from({ length: 8 }, async () => {
      for (;;) {
        const response = await call<{ leaseId: string }>(
          base,
          'GET',
          `/api/v1/pop/queue/bench-leases?batch=1&leaseSeconds=3600&consumerGroup=${group}`,
        );
        if (response.status === 204) return;
        if (response.status !== 200) throw new Error(`pop answered ${response.status}`);
        leases.push(response.body.leaseId);
      }
    });
    await Promise.all(workers);
  }
  return leases.slice(0, count);
}

/** One lease over `partitions` partitions of one message each. */
export async function createHotLease(base: string, partitions: number): Promise<string> {
  await push(
    base,
    'bench-hot',
    Array.from({ length: partitions }, (_unused, index) => ({ partition: `h${index}`, payload: { index } })),
  );
  const response = await call<{ leaseId: string }>(
    base,
    'GET',
    `/api/v1/pop/queue/bench-hot?batch=${partitions}&partitions=${partitions}&leaseSeconds=3600`,
  );
  if (response.status !== 200) throw new Error(`hot pop answered ${response.status}`);
  return response.body.leaseId;
}
