import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the fake broker saw it, for assertions. */
export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: unknown;
  /** `performance.now()` when the request arrived. */
  at: number;
}

export interface Fault {
  status: number;
  body: string;
}

type Route = 'push' | 'pop' | 'extend' | 'ack' | 'ack-batch' | 'configure' | 'transaction' | 'traces';

interface StoredMessage {
  id: string;
  transactionId: string;
  traceId: string | null;
  data: unknown;
  createdAt: string;
}

interface ConsumerRow {
  cursor: number;
  leaseId: string | null;
  leaseExpiresAt: number;
  /** The ceiling's hard end for the current lease; Infinity without a ceiling. */
  leaseHardEnd: number;
  leaseEpoch: number;
  leaseEnd: number;
  lastClaimedCursor: number;
  deliveryAttempt: number;
  retries: number;
}

interface Partition {
  id: string;
  name: string;
  queue: string;
  messages: StoredMessage[];
  consumers: Map<string, ConsumerRow>;
}

interface Queue {
  options: Record<string, unknown>;
  partitions: Map<string, Partition>;
}

const DEFAULT_TENANT = '00000000-0000-0000-0000-000000000001';
const QUEUE_MODE = '__QUEUE_MODE__';
const LEASE_REJECTION = 'invalid or expired lease';
const RENEW_AFTER_HEADER = 'Leasehold-Renew-After';
const DEADLINE_AFTER_HEADER = 'Leasehold-Deadline-After';
const LEASE_STATUS_HEADER = 'Leasehold-Lease-Status';

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * An in-process broker that follows CONTRACT.md for the routes the client uses: leases expire
 * by this broker's own clock, extend answers 200 with `renewed: 0` for any lease that is not
 * live, pop answers a bare 204 when empty and parks with `wait=true`. Every claim bumps the
 * partition's fencing epoch, and an ack that carries a stale one is refused.
 */
export class FakeBroker {
  readonly requests: RecordedRequest[] = [];
  /** When set, every request needs `Authorization: Bearer <token>`. */
  token: string | undefined;
  /** False: pop answers carry no `leaseEpoch` and no `claimedPartitions`, as older brokers. */
  epochs = true;
  /**
   * True: extend answers carry the `Leasehold-*` hint headers. Off by default, so the tests
   * written before them still measure the keeper's own schedule. Renew-After is a third of
   * what remains (the real broker jitters it).
   */
  renewalHints = false;
  /** As the broker's LEASE_MAX_TOTAL_SECONDS: caps a pop's lease and every renewal. */
  leaseMaxTotalSeconds: number | undefined;
  /** When set, every extend answer carries exactly these headers instead of computed hints. */
  extendHeaders: Record<string, string> | undefined;

  private readonly server: Server;
  private readonly tenants = new Map<string, Map<string, Queue>>();
  private readonly faults = new Map<Route, Fault[]>();
  private readonly delays = new Map<Route, number>();
  private readonly stalls = new Map<Route, number>();
  private readonly wakers = new Set<() => void>();
  private readonly wallAtZero = Date.now() - performance.now();
  private clockOffsetMs = 0;
  private closing = false;

  private constructor() {
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  static async start(): Promise<FakeBroker> {
    const broker = new FakeBroker();
    await new Promise<void>((resolve) => broker.server.listen(0, '127.0.0.1', resolve));
    return broker;
  }

  get baseUrl(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** Stops listening and cuts open connections, so clients see the broker as unreachable. */
  async close(): Promise<void> {
    this.closing = true;
    for (const wake of this.wakers) {
      wake();
    }
    if (!this.server.listening) {
      return;
    }
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** Moves the broker's clock forward, as if this worker had been frozen that long. */
  advanceClock(ms: number): void {
    this.clockOffsetMs += ms;
  }

  /** The next `count` requests to `route` answer with `status` and `body`. */
  failNext(route: Route, status: number, body: string, count = 1): void {
    const queue = this.faults.get(route) ?? [];
    for (let i = 0; i < count; i += 1) {
      queue.push({ status, body });
    }
    this.faults.set(route, queue);
  }

  /** Holds every request on `route` for `ms` before doing its work, as a slow database would. */
  stall(route: Route, ms: number): void {
    this.stalls.set(route, ms);
  }

  /** Holds every answer on `route` back by `ms` (the work itself is done on arrival). */
  delay(route: Route, ms: number): void {
    this.delays.set(route, ms);
  }

  requestsTo(route: Route): RecordedRequest[] {
    return this.requests.filter((request) => routeOf(request.method, request.path)?.route === route);
  }

  /** The hard end the claim fixed for a lease (its earliest row's), on this broker's clock. */
  leaseHardEnd(leaseId: string): number {
    let hardEnd = Infinity;
    for (const queues of this.tenants.values()) {
      for (const row of this.rows(queues)) if (row.leaseId === leaseId) hardEnd = Math.min(hardEnd, row.leaseHardEnd);
    }
    return hardEnd;
  }

  private now(): number {
    return performance.now() + this.clockOffsetMs;
  }

  private timestamp(clockMs: number): string {
    const wall = this.wallAtZero + clockMs;
    const micros = Math.floor((wall % 1) * 1000)
      .toString()
      .padStart(3, '0');
    return new Date(Math.floor(wall)).toISOString().replace('Z', `${micros}Z`);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://broker');
    const text = await readBody(req);
    let body: unknown = undefined;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = text;
    }
    this.requests.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body,
      at: performance.now(),
    });
    const match = routeOf(req.method ?? 'GET', url.pathname);
    try {
      if (!match) {
        throw new HttpError(404, 'not found');
      }
      this.authenticate(req);
      const fault = this.faults.get(match.route)?.shift();
      if (fault) {
        res.writeHead(fault.status, { 'content-type': 'application/json' }).end(fault.body);
        return;
      }
      const stallMs = this.stalls.get(match.route) ?? 0;
      if (stallMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, stallMs));
      }
      const tenant = this.tenant(req);
      const [status, answer, headers] = await this.dispatch(
        match.route,
        match.params,
        url.searchParams,
        body,
        tenant,
        res,
        req,
      );
      const delayMs = this.delays.get(match.route) ?? 0;
      if (delayMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      if (res.destroyed) {
        return;
      }
      if (status === 204) {
        res.writeHead(204).end();
      } else {
        res
          .writeHead(status, {
            ...headers,
            'content-type': 'application/json',
          })
          .end(JSON.stringify(answer));
      }
    } catch (error) {
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof Error ? error.message : String(error);
      if (!res.destroyed) {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: message }));
      }
    }
  }

  private authenticate(req: IncomingMessage): void {
    if (this.token === undefined) {
      return;
    }
    const header = req.headers.authorization;
    if (!header) {
      throw new HttpError(401, 'Authentication required');
    }
    if (header !== `Bearer ${this.token}`) {
      throw new HttpError(401, 'Invalid token');
    }
  }

  private tenant(req: IncomingMessage): Map<string, Queue> {
    const name = String(req.headers['x-queen-tenant'] ?? DEFAULT_TENANT);
    let queues = this.tenants.get(name);
    if (!queues) {
      queues = new Map();
      this.tenants.set(name, queues);
    }
    return queues;
  }

  private async dispatch(
    route: Route,
    params: string[],
    query: URLSearchParams,
    body: unknown,
    queues: Map<string, Queue>,
    res: ServerResponse,
    req: IncomingMessage,
  ): Promise<[number, unknown, Record<string, string>?]> {
    switch (route) {
      case 'push':
        return [201, this.push(queues, body)];
      case 'pop':
        return this.pop(queues, params[0], params[1], query, res);
      case 'extend': {
        const { answer, headers } = this.extend(queues, params[0], body);
        return [200, answer, headers];
      }
      case 'ack':
        return [200, [this.ack(queues, body, 0, undefined)]];
      case 'ack-batch':
        return [200, this.ackBatch(queues, body)];
      case 'configure':
        return [200, this.configure(queues, body)];
      case 'transaction':
        return [200, this.transaction(req, queues, body)];
      case 'traces': {
        const { transactionId, partitionId } = (body ?? {}) as { transactionId?: unknown; partitionId?: unknown };
        if (typeof transactionId !== 'string' || typeof partitionId !== 'string') {
          return [400, { error: 'transactionId and partitionId are required' }];
        }
        return [201, { success: true, traceId: randomUUID() }];
      }
    }
  }

  /**
   * As the contract's transaction: operations in order on a copy of the tenant's queues, which
   * replaces them only if every one applied and every required lease is held at the end.
   */
  private transaction(req: IncomingMessage, queues: Map<string, Queue>, body: unknown): unknown {
    const { operations, requiredLeases = [] } = (body ?? {}) as { operations?: unknown; requiredLeases?: string[] };
    if (!Array.isArray(operations) || operations.length === 0) {
      throw new HttpError(400, 'operations must be a non-empty array');
    }
    const transactionId = randomUUID();
    const copy = structuredClone(queues);
    const now = this.now();
    const liveAtStart = new Set(
      [...this.rows(copy)].filter((row) => row.leaseExpiresAt > now).map((row) => row.leaseId),
    );
    const cursorsAtStart = new Map([...this.rows(copy)].map((row) => [row, row.cursor]));
    const refuse = (reason: string, error: string): unknown => ({
      transactionId,
      success: false,
      reason,
      error,
      results: [],
    });
    const results: unknown[] = [];
    const misses: Array<{ reason: string; error: string; done: boolean }> = [];
    const items: Array<{ status: string }> = [];
    let pushed = false;
    for (const [index, operation] of (operations as Array<Record<string, unknown>>).entries()) {
      if (operation.type === 'push') {
        const answers = this.push(copy, operation, false) as Array<{ status: string }>;
        items.push(...answers);
        results.push({ index, type: 'push', success: true, items: answers });
        pushed = true;
      } else if (operation.type === 'ack') {
        const partition = this.findPartition(copy, String(operation.partitionId));
        const row = partition && this.consumer(partition, (operation.consumerGroup as string) ?? QUEUE_MODE);
        const position =
          partition?.messages.findIndex((message) => message.transactionId === operation.transactionId) ?? -1;
        if (row && position >= 0 && position < (cursorsAtStart.get(row) ?? row.cursor)) {
          misses.push({
            reason: 'ack_rejected',
            error: `operations[${index}]: message already acknowledged`,
            done: true,
          });
          continue;
        }
        const held = row?.leaseId && requiredLeases.includes(row.leaseId) ? { leaseId: row.leaseId } : {};
        const result = this.ack(copy, { ...held, ...operation }, index, undefined) as {
          success: boolean;
          error: string;
        };
        if (!result.success) {
          const reason = result.error === LEASE_REJECTION ? 'lease_lost' : 'ack_rejected';
          misses.push({ reason, error: `operations[${index}]: ${result.error}`, done: false });
          continue;
        }
        results.push({ ...result, type: 'ack' });
      } else {
        return refuse('bad_request', `operations[${index}].type must be push or ack`);
      }
    }
    if (misses.length > 0) {
      const replay =
        misses.every((miss) => miss.done) && items.length > 0 && items.every((item) => item.status === 'duplicate');
      if (replay) {
        return refuse('duplicate', `${misses[0].error.split(':')[0]}: already applied`);
      }
      const { reason, error } = misses.find((miss) => miss.reason === 'lease_lost') ?? misses[0];
      return refuse(reason, error);
    }
    for (const lease of requiredLeases) {
      const rows = [...this.rows(copy)].filter((row) => row.leaseId === lease);
      const held = rows.length > 0 ? rows.some((row) => row.leaseExpiresAt > this.now()) : liveAtStart.has(lease);
      if (!held) {
        return refuse('lease_lost', `requiredLeases: ${lease}: ${LEASE_REJECTION}`);
      }
    }
    this.tenants.set(String(req.headers['x-queen-tenant'] ?? DEFAULT_TENANT), copy);
    if (pushed) {
      for (const wake of this.wakers) {
        wake();
      }
    }
    return { transactionId, success: true, results };
  }

  private push(queues: Map<string, Queue>, body: unknown, wake = true): unknown[] {
    const items = (body as { items?: unknown })?.items;
    if (!Array.isArray(items)) {
      throw new HttpError(400, 'items must be an array');
    }
    for (const item of items as Record<string, unknown>[]) {
      if (typeof item?.queue !== 'string' || !('payload' in item)) {
        throw new HttpError(400, 'every item needs a queue and a payload');
      }
    }
    const results = (items as Record<string, unknown>[]).map((item, index) => {
      const partition = this.partition(queues, item.queue as string, (item.partition as string) ?? 'Default');
      const transactionId = (item.transactionId as string) ?? randomUUID();
      const existing = partition.messages.find((message) => message.transactionId === transactionId);
      if (existing) {
        return {
          index,
          message_id: existing.id,
          transaction_id: transactionId,
          queueName: partition.queue,
          status: 'duplicate',
        };
      }
      const message: StoredMessage = {
        id: randomUUID(),
        transactionId,
        traceId: (item.traceId as string) ?? null,
        data: item.payload,
        createdAt: this.timestamp(this.now()),
      };
      partition.messages.push(message);
      return {
        index,
        message_id: message.id,
        transaction_id: transactionId,
        queueName: partition.queue,
        status: 'queued',
      };
    });
    if (wake) {
      for (const waker of this.wakers) {
        waker();
      }
    }
    return results;
  }

  private async pop(
    queues: Map<string, Queue>,
    queueName: string,
    partitionName: string | undefined,
    query: URLSearchParams,
    res: ServerResponse,
  ): Promise<[number, unknown]> {
    const wait = query.get('wait') === 'true';
    const timeoutMs = Number(query.get('timeout') ?? 30_000);
    const parkedUntil = performance.now() + timeoutMs;
    for (;;) {
      const claimed = this.claim(queues, queueName, partitionName, query);
      if (claimed || !wait || this.closing || res.destroyed || performance.now() >= parkedUntil) {
        return claimed ? [200, claimed] : [204, undefined];
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          this.wakers.delete(wake);
          clearTimeout(timer);
          res.off('close', wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.max(0, parkedUntil - performance.now()));
        this.wakers.add(wake);
        res.on('close', wake);
      });
    }
  }

  private claim(
    queues: Map<string, Queue>,
    queueName: string,
    partitionName: string | undefined,
    query: URLSearchParams,
  ): unknown {
    const queue = queues.get(queueName);
    if (!queue) {
      return null;
    }
    const group = query.get('consumerGroup') ?? QUEUE_MODE;
    let room = Number(query.get('batch') ?? 200);
    const maxPartitions = Number(query.get('partitions') ?? 1);
    const ceiling = this.leaseMaxTotalSeconds ?? Infinity;
    const leaseSeconds = Math.min(ceiling, Number(query.get('leaseSeconds') ?? queue.options.leaseTime ?? 60));
    const leaseId = randomUUID();
    const now = this.now();
    const claimed: Partition[] = [];
    const claimedPartitions: unknown[] = [];
    const messages: unknown[] = [];
    for (const partition of queue.partitions.values()) {
      if (claimed.length >= maxPartitions || room <= 0) {
        break;
      }
      if (partitionName !== undefined && partition.name !== partitionName) {
        continue;
      }
      const row = this.consumer(partition, group);
      const live = row.leaseId !== null && row.leaseExpiresAt > now;
      if (live || row.cursor >= partition.messages.length) {
        continue;
      }
      const span = partition.messages.slice(row.cursor, row.cursor + room);
      row.deliveryAttempt = row.lastClaimedCursor === row.cursor ? row.deliveryAttempt + 1 : 1;
      row.lastClaimedCursor = row.cursor;
      row.leaseId = leaseId;
      row.leaseExpiresAt = now + leaseSeconds * 1000;
      row.leaseHardEnd = now + ceiling * 1000;
      row.leaseEpoch += 1;
      row.leaseEnd = row.cursor + span.length;
      room -= span.length;
      claimed.push(partition);
      const epoch = this.epochs ? { leaseEpoch: row.leaseEpoch } : {};
      claimedPartitions.push({
        partitionId: partition.id,
        partition: partition.name,
        ...epoch,
        messages: span.length,
      });
      for (const message of span) {
        messages.push({
          ...message,
          partitionId: partition.id,
          partition: partition.name,
          leaseId,
          consumerGroup: group === QUEUE_MODE ? null : group,
          producerSub: null,
          deliveryAttempt: row.deliveryAttempt,
          ...epoch,
        });
      }
    }
    if (claimed.length === 0) {
      return null;
    }
    return {
      success: true,
      queue: queueName,
      partition: claimed[0].name,
      partitionId: claimed[0].id,
      leaseId,
      consumerGroup: group === QUEUE_MODE ? null : group,
      messages,
      partitionsClaimed: claimed.length,
      ...(this.epochs ? { claimedPartitions } : {}),
    };
  }

  private extend(
    queues: Map<string, Queue>,
    leaseId: string,
    body: unknown,
  ): { answer: unknown; headers: Record<string, string> } {
    const requested = (body as { seconds?: unknown } | undefined)?.seconds;
    const valid = Number.isInteger(requested) && Math.abs(requested as number) <= 2_147_483_647;
    const seconds = valid ? Math.max(1, requested as number) : 60;
    const now = this.now();
    let renewed = 0;
    let earliest = Infinity;
    let hardEnd = Infinity;
    let expired = false;
    for (const row of this.rows(queues)) {
      if (row.leaseId !== leaseId) {
        continue;
      }
      if (row.leaseExpiresAt <= now) {
        expired = true;
        continue;
      }
      row.leaseExpiresAt = Math.max(row.leaseExpiresAt, Math.min(row.leaseHardEnd, now + seconds * 1000));
      earliest = Math.min(earliest, row.leaseExpiresAt);
      hardEnd = Math.min(hardEnd, row.leaseHardEnd);
      renewed += 1;
    }
    const expiry = renewed > 0 ? this.timestamp(earliest) : null;
    const answer = {
      leaseId,
      success: renewed > 0,
      renewed,
      newExpiresAt: expiry,
      expiresAt: expiry,
      lease_expires_at: expiry,
    };
    const headers: Record<string, string> = {};
    if (this.extendHeaders !== undefined) {
      return { answer, headers: this.extendHeaders };
    }
    if (!this.renewalHints) {
      return { answer, headers };
    }
    if (renewed === 0) {
      headers[LEASE_STATUS_HEADER] = expired ? 'expired' : 'unknown';
      return { answer, headers };
    }
    if (earliest < hardEnd) {
      headers[RENEW_AFTER_HEADER] = seconds3((earliest - now) / 3);
    }
    if (hardEnd !== Infinity) {
      headers[DEADLINE_AFTER_HEADER] = seconds3(hardEnd - now);
    }
    return { answer, headers };
  }

  private ackBatch(queues: Map<string, Queue>, body: unknown): unknown[] {
    const { acknowledgments, consumerGroup } = (body ?? {}) as {
      acknowledgments?: unknown;
      consumerGroup?: string | null;
    };
    if (!Array.isArray(acknowledgments)) {
      throw new HttpError(400, 'acknowledgments must be an array');
    }
    return acknowledgments.map((entry, index) => this.ack(queues, entry, index, consumerGroup));
  }

  private ack(
    queues: Map<string, Queue>,
    body: unknown,
    index: number,
    batchGroup: string | null | undefined,
  ): unknown {
    const ack = (body ?? {}) as Record<string, string | null | undefined>;
    const { leaseEpoch } = (body ?? {}) as { leaseEpoch?: unknown };
    const transactionId = ack.transactionId ?? '';
    const group = ack.consumerGroup ?? batchGroup ?? QUEUE_MODE;
    const refuse = (error: string): unknown => ({
      index,
      transactionId,
      success: false,
      error,
      leaseReleased: false,
      dlq: false,
    });
    const partition = this.findPartition(queues, ack.partitionId ?? '');
    if (!partition) {
      return refuse('partition not found');
    }
    const row = this.consumer(partition, group);
    const live = row.leaseId !== null && row.leaseExpiresAt > this.now();
    if (ack.leaseId !== undefined && ack.leaseId !== null && !(live && row.leaseId === ack.leaseId)) {
      return refuse(LEASE_REJECTION);
    }
    if (leaseEpoch !== undefined && leaseEpoch !== row.leaseEpoch) {
      return refuse(LEASE_REJECTION);
    }
    const position = partition.messages.findIndex((message) => message.transactionId === transactionId);
    if (position < 0) {
      return refuse('message not found');
    }
    const status = ack.status ?? 'completed';
    if (['completed', 'success', 'acked', 'ok'].includes(status)) {
      row.cursor = Math.max(row.cursor, position + 1);
      const released = row.cursor >= row.leaseEnd;
      if (released) {
        row.leaseId = null;
      }
      return {
        index,
        transactionId,
        success: true,
        error: null,
        leaseReleased: released,
        dlq: false,
      };
    }
    row.leaseId = null;
    row.retries += 1;
    const retryLimit = Number(this.queueOf(queues, partition).options.retryLimit ?? 3);
    const dlq = row.retries > retryLimit;
    if (dlq) {
      row.cursor = position + 1;
      row.retries = 0;
    }
    return {
      index,
      transactionId,
      success: true,
      error: null,
      leaseReleased: true,
      dlq,
    };
  }

  private configure(queues: Map<string, Queue>, body: unknown): unknown {
    const { queue, options } = (body ?? {}) as {
      queue?: unknown;
      options?: Record<string, unknown>;
    };
    if (typeof queue !== 'string') {
      throw new HttpError(400, 'queue is required');
    }
    const state = this.queue(queues, queue);
    state.options = { ...state.options, ...(options ?? {}) };
    return { configured: true, queue, options: state.options };
  }

  private queue(queues: Map<string, Queue>, name: string): Queue {
    let queue = queues.get(name);
    if (!queue) {
      queue = { options: {}, partitions: new Map() };
      queues.set(name, queue);
    }
    return queue;
  }

  private partition(queues: Map<string, Queue>, queueName: string, name: string): Partition {
    const queue = this.queue(queues, queueName);
    let partition = queue.partitions.get(name);
    if (!partition) {
      partition = {
        id: randomUUID(),
        name,
        queue: queueName,
        messages: [],
        consumers: new Map(),
      };
      queue.partitions.set(name, partition);
    }
    return partition;
  }

  private consumer(partition: Partition, group: string): ConsumerRow {
    let row = partition.consumers.get(group);
    if (!row) {
      row = {
        cursor: 0,
        leaseId: null,
        leaseExpiresAt: 0,
        leaseHardEnd: Infinity,
        leaseEpoch: 0,
        leaseEnd: 0,
        lastClaimedCursor: -1,
        deliveryAttempt: 0,
        retries: 0,
      };
      partition.consumers.set(group, row);
    }
    return row;
  }

  private findPartition(queues: Map<string, Queue>, id: string): Partition | undefined {
    for (const queue of queues.values()) {
      for (const partition of queue.partitions.values()) {
        if (partition.id === id) {
          return partition;
        }
      }
    }
    return undefined;
  }

  private queueOf(queues: Map<string, Queue>, partition: Partition): Queue {
    return queues.get(partition.queue) as Queue;
  }

  private *rows(queues: Map<string, Queue>): Iterable<ConsumerRow> {
    for (const queue of queues.values()) {
      for (const partition of queue.partitions.values()) {
        yield* partition.consumers.values();
      }
    }
  }
}

function routeOf(method: string, path: string): { route: Route; params: string[] } | undefined {
  const patterns: [string, RegExp, Route][] = [
    ['POST', /^\/api\/v1\/push$/, 'push'],
    ['GET', /^\/api\/v1\/pop\/queue\/([^/]+)(?:\/partition\/([^/]+))?$/, 'pop'],
    ['POST', /^\/api\/v1\/lease\/([^/]+)\/extend$/, 'extend'],
    ['POST', /^\/api\/v1\/ack$/, 'ack'],
    ['POST', /^\/api\/v1\/ack\/batch$/, 'ack-batch'],
    ['POST', /^\/api\/v1\/configure$/, 'configure'],
    ['POST', /^\/api\/v1\/transaction$/, 'transaction'],
    ['POST', /^\/api\/v1\/traces$/, 'traces'],
  ];
  for (const [verb, pattern, route] of patterns) {
    const match = method === verb ? pattern.exec(path) : null;
    if (match) {
      return {
        route,
        params: match.slice(1).map((param) => (param === undefined ? param : decodeURIComponent(param))),
      };
    }
  }
  return undefined;
}

function seconds3(ms: number): string {
  return (ms / 1000).toFixed(3);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
