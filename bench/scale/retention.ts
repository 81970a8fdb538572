import {
  ackAll,
  BASE_PORT,
  count,
  createDatabase,
  Curve,
  DATABASE_PREFIX,
  dbNow,
  dropDatabase,
  expectStatus,
  LARGEST,
  metricValue,
  Popped,
  ScenarioResult,
  scrape,
  send,
  sleep,
  startBroker,
  withClient,
} from './common';
import { hasColumn, seedQueue, uuidOf, vacuumAnalyze } from './seed';

/*
 * (3) Deletion on time. One tenant; the broker's retention job every INTERVAL_MS.
 * - Sustained deletion: DELETABLE consumed messages (200 per partition, completed retention long past, due now) are
 *   left to the job; leasehold_retention_deleted_total{reason="completed"} is read every 2 s.
 * - On time: a burst of LARGEST new partitions (one unconsumed message each, all due for a look, as new partitions
 *   are) is written, then a message is pushed, popped and acked on a queue keeping consumed messages 1 s: from the
 *   instant it became deletable (its push + 1 s, database clock) to the instant it is gone.
 * - leasehold_retention_lag_seconds, if the broker exposes it.
 */

const INTERVAL_MS = 10_000;
const PER_PARTITION = 200;
const DELETABLE = Math.min(1_000_000, Math.max(100_000, LARGEST));
const RATE_CAP_MS = 180_000;

export async function retention(): Promise<ScenarioResult> {
  const database = `${DATABASE_PREFIX}_retention`;
  const url = await createDatabase(database);
  const tenant = uuidOf(0x7f000000, 1);
  const port = BASE_PORT + 1;
  const env = { RETENTION_INTERVAL_MS: String(INTERVAL_MS) };
  try {
    // Migrate, then seed with no job running.
    const migrating = await startBroker({ databaseUrl: url, port, env: { RETENTION_INTERVAL_MS: '0' } });
    await migrating.stop();
    await withClient(url, async (client) => {
      await seedQueue(client, {
        family: 0x2000,
        tenant,
        queue: 'bulk',
        partitions: Math.ceil(DELETABLE / PER_PARTITION),
        messagesPerPartition: PER_PARTITION,
        ageSeconds: 7200,
        retentionCheckAt: 'now()',
        queueOptions: { completedRetentionSeconds: 60 },
      });
      await vacuumAnalyze(client);
    });
    const broker = await startBroker({ databaseUrl: url, port, env });
    // Sustained deletion.
    const samples: Array<[number, number]> = [];
    const begun = performance.now();
    let lag: number | undefined;
    let lagSeen = false;
    for (;;) {
      const text = await scrape(broker.base);
      const deleted = metricValue(text, 'leasehold_retention_deleted_total', { reason: 'completed' }) ?? 0;
      const lagNow = metricValue(text, 'leasehold_retention_lag_seconds');
      if (lagNow !== undefined) {
        lagSeen = true;
        lag = Math.max(lag ?? 0, lagNow);
      }
      samples.push([(performance.now() - begun) / 1000, deleted]);
      if (deleted >= DELETABLE || performance.now() - begun > RATE_CAP_MS) break;
      await sleep(1000);
    }
    // From the last sample before any deletion, so a fast job is not credited with a zero-length start.
    const first = [...samples].reverse().find(([, deleted]) => deleted === 0) ?? samples[0];
    const last = samples[samples.length - 1];
    const rate = last[0] > first[0] ? (last[1] - first[1]) / (last[0] - first[0]) : 0;
    const windows = samples.slice(1).map(([at, deleted], index) => {
      const [before, was] = samples[index];
      return [Math.round(at), (deleted - was) / (at - before)] as [number, number];
    });

    // On time after a burst of new partitions, each due for a look when the push would have set it: at once before
    // due-driven scheduling (consumers.retention_seen), when its message comes of age (14 days) since.
    await withClient(url, async (client) => {
      const dueDriven = await hasColumn(client, 'consumers', 'retention_seen');
      await seedQueue(client, {
        family: 0x3000,
        tenant,
        queue: 'burst',
        partitions: LARGEST,
        drained: false,
        ageSeconds: 0,
        retentionCheckAt: dueDriven ? "now() + interval '1209600 seconds'" : 'now()',
      });
      await client.query('VACUUM ANALYZE partitions');
      await client.query('VACUUM ANALYZE messages');
    });
    await expectStatus(
      send(broker.base, tenant, 'POST', '/api/v1/configure', {
        queue: 'target',
        options: { completedRetentionSeconds: 1 },
      }),
      200,
      201,
    );
    const pushed = await expectStatus(
      send<Array<{ transaction_id: string }>>(broker.base, tenant, 'POST', '/api/v1/push', {
        items: [{ queue: 'target', payload: { deletable: 'soon' } }],
      }),
      201,
    );
    const popped = await expectStatus(
      send<Popped>(broker.base, tenant, 'GET', '/api/v1/pop/queue/target?wait=false'),
      200,
    );
    await expectStatus(ackAll(broker.base, tenant, popped.body), 200);
    const transactionId = pushed.body[0].transaction_id;
    const limitMs = INTERVAL_MS + 60_000;
    const onTime = await withClient(url, async (client) => {
      const { rows } = await client.query<{ due: string }>(
        `SELECT (extract(epoch FROM created_at + interval '1 second') * 1000)::float8 AS due
           FROM messages WHERE tenant_id = $1 AND transaction_id = $2`,
        [tenant, transactionId],
      );
      const due = Number(rows[0]?.due);
      for (;;) {
        const { rowCount } = await client.query('SELECT 1 FROM messages WHERE tenant_id = $1 AND transaction_id = $2', [
          tenant,
          transactionId,
        ]);
        const now = await dbNow(client);
        if (rowCount === 0) return { deleted: true, ms: now - due };
        // Twice the target, then give up: the figure is then "more than".
        if (now - due > 2 * limitMs) return { deleted: false, ms: now - due };
        await sleep(250);
      }
    });
    const text = await scrape(broker.base);
    const lagAfter = metricValue(text, 'leasehold_retention_lag_seconds');
    if (lagAfter !== undefined) {
      lagSeen = true;
      lag = Math.max(lag ?? 0, lagAfter);
    }
    await broker.stop();
    const curve: Curve = {
      file: 'scale-retention',
      title: `Retention: rows deleted per second (${DELETABLE.toLocaleString('en')} deletable)`,
      xName: 'seconds since the broker started',
      yName: 'rows/s',
      logX: false,
      series: [{ name: 'deleted rows/s (1 s windows)', points: windows }],
      limit: { value: 20_000, name: 'target' },
    };
    return {
      outcomes: [
        {
          target: `deletable → deleted within one retention interval + 60 s (${(limitMs / 1000).toFixed(0)} s) after a burst of ${count(LARGEST)} new partitions`,
          measured: onTime.deleted
            ? `${(onTime.ms / 1000).toFixed(1)} s`
            : `not deleted after ${(onTime.ms / 1000).toFixed(0)} s`,
          met: onTime.deleted && onTime.ms <= limitMs,
        },
        {
          target: 'sustained deletion ≥ 20,000 rows/s',
          measured: `${Math.round(rate).toLocaleString('en')} rows/s over ${last[1].toLocaleString('en')} rows in ${(last[0] - first[0]).toFixed(0)} s`,
          met: rate >= 20_000,
        },
        {
          target: 'the retention job lag is a metric (leasehold_retention_lag_seconds)',
          measured: lagSeen ? `present, at most ${lag?.toFixed(1)} s during the run` : 'absent',
          met: lagSeen,
        },
      ],
      curves: [curve],
      notes: [
        `retention: RETENTION_INTERVAL_MS=${INTERVAL_MS}, RETENTION_BATCH_SIZE default; ${DELETABLE.toLocaleString('en')} consumed messages, ${PER_PARTITION} per partition, all due; the rate is from the last sample before any deletion (sampled every second) to the last sample (all deleted, or ${RATE_CAP_MS / 1000} s). The burst's partitions each keep one unconsumed message, as after a push.`,
      ],
    };
  } finally {
    await dropDatabase(database);
  }
}
