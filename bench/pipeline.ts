import { call, percentile } from './http';

/*
 * A two-stage pipeline: stage one pops from `in`, and for each batch acks
 * its input and pushes its output to `out`, either in one transaction or as
 * a push followed by an ack; stage two pops from `out` and acks. Measured
 * twice per mode: draining a backlog (end-to-end messages per second), and
 * under a steady feed well below that (end-to-end latency, push to the final
 * ack, and stage one's cycle). Every output must reach stage two exactly
 * once. A third mode runs stage one as Queen's streaming SDK would with a
 * running sum per partition: read the partition's state, then one cycle of
 * the state write, the pushes and the ack of the batch's last message. A
 * fourth keeps a tumbling-window sum per partition as Queen's SDK would
 * (windows of WINDOW messages by each partition's event order): it reads the
 * partition's open windows, and one cycle deletes the windows a later event
 * closed, emits their sums, keeps the open ones and acks the batch; stage two
 * takes the sums, each window exactly once and whole (errors otherwise).
 */

export type PipelineMode = 'transaction' | 'push then ack' | 'stream cycle' | 'stream window';

export interface PipelineRow {
  mode: PipelineMode;
  /** cold: a backlog drained by a new broker on a new database, its first pipeline (as after a deploy or a restart). */
  phase: 'backlog' | 'steady' | 'cold';
  messages: number;
  messagesPerSecond: number;
  endToEndP50: number;
  endToEndP99: number;
  stageOneP50: number;
  stageOneP99: number;
  errors: number;
  /** Milliseconds of the broker's CPU per message carried through both stages, its feed included (set by the caller). */
  brokerCpuMs?: number;
  /** The same of every PostgreSQL process. */
  postgresCpuMs?: number;
  /** The broker's CPU per message of each unmeasured run of the mode before this row, on the same broker (set by the caller). */
  warmUp?: number[];
}

const PARTITIONS = 8;
const WORKERS = 4;
const BATCH = 10;
const BACKLOG = 3_000;
const STEADY_PER_SECOND = 300;
const STEADY_SECONDS = 8;
/** Source messages per window and partition: the backlog and the steady feed each fill their windows whole. */
const WINDOW = 25;

interface Popped {
  leaseId: string;
  messages: Array<{
    transactionId: string;
    partitionId: string;
    leaseEpoch: number;
    data: { sentAt: number; n?: number; window?: number; count?: number };
  }>;
}

/** An open window as the state keeps it. */
interface OpenWindow {
  sum: number;
  count: number;
  sentAt: number;
}

/** `run` names a run's queues and ids apart from another run's of the same mode and phase (a warm-up's). */
export async function measurePipeline(
  base: string,
  mode: PipelineMode,
  phase: 'backlog' | 'steady',
  run = '',
): Promise<PipelineRow> {
  const tags: Record<PipelineMode, string> = {
    transaction: 'tx',
    'push then ack': 'split',
    'stream cycle': 'stream',
    'stream window': 'window',
  };
  const tag = `${tags[mode]}-${phase}${run}`;
  const windowed = mode === 'stream window';
  const input = `bench-pipe-in-${tag}`;
  const output = `bench-pipe-out-${tag}`;
  const fed = phase === 'backlog' ? BACKLOG : STEADY_PER_SECOND * STEADY_SECONDS;
  // A window's sum reaches stage two as one message: fed / (PARTITIONS * WINDOW) per partition.
  const expected = windowed ? fed / WINDOW : fed;
  const endToEnd: number[] = [];
  const stageOne: number[] = [];
  const delivered = new Set<string>();
  let errors = 0;
  let done = false;
  const deadline = performance.now() + 120_000;

  const feed = async (count: number, offset: number): Promise<void> => {
    const sentAt = performance.now();
    const items = Array.from({ length: count }, (_, n) => ({
      queue: input,
      partition: `p${(offset + n) % PARTITIONS}`,
      transactionId: `in-${offset + n}`,
      payload: { sentAt, n: offset + n },
    }));
    const pushed = await call(base, 'POST', '/api/v1/push', { items });
    if (pushed.status !== 201) errors += 1;
  };

  let queryId = '';
  if (mode === 'stream cycle' || windowed) {
    const registered = await call<{ query_id: string }>(base, 'POST', '/streams/v1/queries', {
      name: `bench-${tag}`,
      source_queue: input,
      sink_queue: output,
      config_hash: 'bench',
      reset: true,
    });
    if (registered.status !== 200) throw new Error(`register: ${registered.status}`);
    queryId = registered.body.query_id;
  }

  const pop = (queue: string) =>
    call<Popped>(base, 'GET', `/api/v1/pop/queue/${queue}?batch=${BATCH}&wait=true&timeout=500&leaseSeconds=30`);

  const stageOneWorker = async (): Promise<void> => {
    while (!done && performance.now() < deadline) {
      const popped = await pop(input);
      if (popped.status === 204) continue;
      if (popped.status !== 200) {
        errors += 1;
        continue;
      }
      const started = performance.now();
      const { leaseId, messages } = popped.body;
      const outputs = messages.map((message) => ({
        queue: output,
        partition: message.partitionId.slice(-1),
        transactionId: `out-${message.transactionId}`,
        payload: message.data,
      }));
      const acks = messages.map((message) => ({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseId,
        leaseEpoch: message.leaseEpoch,
      }));
      if (windowed) {
        if (!(await windowCycle(base, queryId, output, leaseId, messages))) errors += 1;
      } else if (mode === 'stream cycle') {
        const last = messages[messages.length - 1];
        const partitionId = last.partitionId;
        const state = await call<{ rows: Array<{ value: { sum: number } }> }>(base, 'POST', '/streams/v1/state/get', {
          query_id: queryId,
          partition_id: partitionId,
          keys: ['sum'],
        });
        const sum = (state.body.rows?.[0]?.value.sum ?? 0) + messages.length;
        const committed = await call<{ success: boolean }>(base, 'POST', '/streams/v1/cycle', {
          query_id: queryId,
          partition_id: partitionId,
          state_ops: [{ type: 'upsert', key: 'sum', value: { sum } }],
          push_items: outputs,
          ack: { transactionId: last.transactionId, leaseId, leaseEpoch: last.leaseEpoch, count: messages.length },
        });
        if (state.status !== 200 || committed.status !== 200 || !committed.body.success) errors += 1;
      } else if (mode === 'transaction') {
        const committed = await call<{ success: boolean }>(base, 'POST', '/api/v1/transaction', {
          operations: [...acks.map((ack) => ({ type: 'ack', ...ack })), { type: 'push', items: outputs }],
          requiredLeases: [leaseId],
        });
        if (committed.status !== 200 || !committed.body.success) errors += 1;
      } else {
        const pushed = await call(base, 'POST', '/api/v1/push', { items: outputs });
        const acked = await call<Array<{ success: boolean }>>(base, 'POST', '/api/v1/ack/batch', {
          acknowledgments: acks,
        });
        if (pushed.status !== 201 || acked.status !== 200 || acked.body.some((answer) => !answer.success)) errors += 1;
      }
      stageOne.push(performance.now() - started);
    }
  };

  const stageTwoWorker = async (): Promise<void> => {
    while (!done && performance.now() < deadline) {
      const popped = await pop(output);
      if (popped.status === 204) continue;
      if (popped.status !== 200) {
        errors += 1;
        continue;
      }
      const acked = await call<Array<{ success: boolean }>>(base, 'POST', '/api/v1/ack/batch', {
        acknowledgments: popped.body.messages.map((message) => ({
          transactionId: message.transactionId,
          partitionId: message.partitionId,
          leaseId: popped.body.leaseId,
        })),
      });
      if (acked.status !== 200 || acked.body.some((answer) => !answer.success)) {
        errors += 1;
        continue;
      }
      const now = performance.now();
      for (const message of popped.body.messages) {
        if (delivered.has(message.transactionId)) errors += 1;
        if (windowed && message.data.count !== WINDOW) errors += 1;
        delivered.add(message.transactionId);
        endToEnd.push(now - message.data.sentAt);
      }
      if (delivered.size >= expected) done = true;
    }
  };

  if (phase === 'backlog') {
    for (let offset = 0; offset < BACKLOG; offset += 500) await feed(500, offset);
  }
  const started = performance.now();
  const feeding: Array<Promise<void>> = [];
  const workers = [
    ...Array.from({ length: WORKERS }, stageOneWorker),
    ...Array.from({ length: WORKERS }, stageTwoWorker),
  ];
  if (phase === 'steady') {
    const perTick = STEADY_PER_SECOND / 10;
    for (let tick = 0; tick < STEADY_SECONDS * 10; tick += 1) {
      const due = started + tick * 100;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
      feeding.push(feed(perTick, tick * perTick));
    }
  }
  await Promise.all(feeding);
  // One event per partition past the last window closes it, as a later event would.
  if (windowed) await feed(PARTITIONS, fed);
  await Promise.all(workers);
  const seconds = (performance.now() - started) / 1000;
  if (delivered.size !== expected) errors += Math.abs(expected - delivered.size);
  const round = (ms: number) => Math.round(ms);
  // Source messages carried: a window's sum stands for its WINDOW messages.
  const carried = windowed ? delivered.size * WINDOW : delivered.size;
  return {
    mode,
    phase,
    messages: carried,
    messagesPerSecond: Math.round(carried / seconds),
    endToEndP50: round(percentile(endToEnd, 0.5)),
    endToEndP99: round(percentile(endToEnd, 0.99)),
    stageOneP50: round(percentile(stageOne, 0.5)),
    stageOneP99: round(percentile(stageOne, 0.99)),
    errors,
  };
}

/**
 * One stage-one step of the windowed sum: the partition's open windows, then one cycle that adds the batch, emits
 * and deletes each window a later event closed, keeps the rest and acks the batch. False when refused.
 */
async function windowCycle(
  base: string,
  queryId: string,
  output: string,
  leaseId: string,
  messages: Popped['messages'],
): Promise<boolean> {
  const last = messages[messages.length - 1];
  const partitionId = last.partitionId;
  const state = await call<{ rows?: Array<{ key: string; value: OpenWindow }> }>(
    base,
    'POST',
    '/streams/v1/state/get',
    {
      query_id: queryId,
      partition_id: partitionId,
      keys: [],
    },
  );
  if (state.status !== 200) return false;
  const windows = new Map((state.body.rows ?? []).map((row) => [Number(row.key.slice(2)), row.value]));
  let latest = -1;
  for (const message of messages) {
    const window = Math.floor(Math.floor(message.data.n! / PARTITIONS) / WINDOW);
    const open = windows.get(window) ?? { sum: 0, count: 0, sentAt: message.data.sentAt };
    open.sum += 1;
    open.count += 1;
    open.sentAt = Math.min(open.sentAt, message.data.sentAt);
    windows.set(window, open);
    latest = Math.max(latest, window);
  }
  const stateOps: unknown[] = [];
  const pushItems: unknown[] = [];
  for (const [window, open] of windows) {
    if (window < latest) {
      pushItems.push({
        queue: output,
        partition: partitionId.slice(-8),
        transactionId: `win-${partitionId}-${window}`,
        payload: { sentAt: open.sentAt, window, count: open.count, sum: open.sum },
      });
      stateOps.push({ type: 'delete', key: `w:${window}` });
    } else {
      stateOps.push({ type: 'upsert', key: `w:${window}`, value: open });
    }
  }
  const committed = await call<{ success: boolean }>(base, 'POST', '/streams/v1/cycle', {
    query_id: queryId,
    partition_id: partitionId,
    state_ops: stateOps,
    push_items: pushItems,
    ack: { transactionId: last.transactionId, leaseId, leaseEpoch: last.leaseEpoch, count: messages.length },
  });
  return committed.status === 200 && committed.body.success;
}
