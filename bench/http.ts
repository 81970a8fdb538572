/** What the benchmarks share: a JSON call to a broker, a pop followed by the ack of what it got, percentiles. */

export interface Answer<T> {
  status: number;
  body: T;
  /** Milliseconds from sending to the whole answer. */
  ms: number;
  /** performance.now() when the answer had arrived. */
  at: number;
}

export async function call<T>(base: string, method: string, path: string, body?: unknown): Promise<Answer<T>> {
  const started = performance.now();
  const response = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const at = performance.now();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T, ms: at - started, at };
}

export interface PopAndAck {
  /** The pop's status: 200 (acked), 204 (nothing), or a failure. */
  status: number;
  messages: number;
  popMs: number;
  /** Undefined when there was nothing to ack. */
  ackMs?: number;
  /** The pop failed, or the ack did not accept every message. */
  failed: boolean;
}

/** One consumer step: pop (the path holds the queue and its query), then ack all it got as completed. */
export async function popAndAck(base: string, popPath: string): Promise<PopAndAck> {
  const popped = await call<{ leaseId: string; messages: Array<{ transactionId: string; partitionId: string }> }>(
    base,
    'GET',
    popPath,
  );
  if (popped.status !== 200)
    return { status: popped.status, messages: 0, popMs: popped.ms, failed: popped.status !== 204 };
  const acked = await call<Array<{ success: boolean }>>(base, 'POST', '/api/v1/ack/batch', {
    acknowledgments: popped.body.messages.map((message) => ({
      transactionId: message.transactionId,
      partitionId: message.partitionId,
      leaseId: popped.body.leaseId,
      status: 'completed',
    })),
  });
  return {
    status: 200,
    messages: popped.body.messages.length,
    popMs: popped.ms,
    ackMs: acked.ms,
    failed: acked.status !== 200 || acked.body.some((answer) => !answer.success),
  };
}

/** `total` messages pushed 1000 at a time by 4 producers, partition `p0` to `p{partitions - 1}` in turn. */
export async function pushInBatches(
  base: string,
  queue: string,
  total: number,
  partitions: number,
  payload: (index: number) => unknown,
): Promise<void> {
  let pushed = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (pushed < total) {
        const partition = `p${Math.floor(pushed / 1000) % partitions}`;
        const count = Math.min(1000, total - pushed);
        pushed += count;
        const items = Array.from({ length: count }, (_unused, index) => ({
          queue,
          partition,
          payload: payload(index),
        }));
        const answer = await call(base, 'POST', '/api/v1/push', { items });
        if (answer.status !== 201) throw new Error(`push answered ${answer.status}`);
      }
    }),
  );
}

/** The value at quantile `p` of `values` (in any order); 0 for none. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
}
