import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { Pool } from 'pg';
import { PartitionRow, storeRows } from './push-rows';

/*
 * The least any Node HTTP process pays for a push: node:http, JSON.parse, the
 * node-postgres rows ceiling's transaction (bench/push-rows.ts) on a pool of 10,
 * and the broker's answer written with JSON.stringify. No framework, no
 * validation, no duplicate check, no wakeups, no metrics. Between it and the
 * ceiling is what serving HTTP in Node costs on this machine; between the
 * broker and it is what the broker adds.
 */

interface Item {
  queue: string;
  partition: string;
  payload: unknown;
}

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const partitions = new Map<string, Promise<PartitionRow>>();

function partitionOf(queue: string, name: string): Promise<PartitionRow> {
  const key = `${queue}\u0000${name}`;
  let found = partitions.get(key);
  if (!found) {
    found = pool
      .query<PartitionRow>(
        `SELECT p.tenant_id, p.id FROM partitions p JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
          WHERE q.name = $1 AND p.name = $2`,
        [queue, name],
      )
      .then(({ rows: [row] }) => {
        if (!row) throw new Error(`no partition ${name} in queue ${queue}: run the push workload first`);
        return row;
      });
    partitions.set(key, found);
  }
  return found;
}

async function push(items: Item[]): Promise<unknown[]> {
  const partition = await partitionOf(items[0].queue, items[0].partition);
  const client = await pool.connect();
  try {
    const { ids, transactionIds } = await storeRows(
      client,
      partition,
      items.map((item) => JSON.stringify(item.payload)),
    );
    return items.map((item, index) => ({
      index,
      message_id: ids[index],
      transaction_id: transactionIds[index],
      queueName: item.queue,
      status: 'queued',
    }));
  } finally {
    client.release();
  }
}

function answer(response: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  response.end(json);
}

function serve(request: IncomingMessage, response: ServerResponse): void {
  if (request.method !== 'POST') return answer(response, 200, { ready: true });
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    let items: Item[];
    try {
      ({ items } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { items: Item[] });
    } catch {
      return answer(response, 400, { error: 'invalid JSON body' });
    }
    push(items).then(
      (results) => answer(response, 201, results),
      (error: Error) => answer(response, 500, { error: error.message }),
    );
  });
}

createServer(serve).listen(Number(process.argv[2] ?? 6705), '127.0.0.1');
