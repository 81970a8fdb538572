import { api, GroupSummary, QueueList, QuotaUsage, QuotaUse } from '../api';
import { Loading, PageTitle, Problem, Sparkline, Stat } from '../components';
import { bytes, count, duration, groupLabel, rate } from '../format';
import { HistoryPanel } from '../history';
import { usePolled } from '../refresh';
import { ratesOf, record } from '../throughput';

/** One default retention interval (30 s) and the minute the retention promise allows past it. */
const RETENTION_LAG_WARN_SECONDS = 90;

interface QueueRow {
  name: string;
  depth: number;
  lagMessages: number;
  lagSeconds: number;
  deadLetters: number;
  liveLeases: number;
  groups: number;
}

export function Overview() {
  const polled = usePolled(async () => {
    const [list, groups, usage] = await Promise.all([
      api<QueueList>('GET', '/resources/queues'),
      api<GroupSummary[]>('GET', '/consumer-groups'),
      api<QuotaUsage>('GET', '/resources/quotas'),
    ]);
    record(list.queues);
    return { list, groups, usage };
  }, 'overview');
  const { data, error } = polled;
  if (!data) {
    return (
      <main id="main">
        <PageTitle>Queues</PageTitle>
        {error ? <Problem error={error} /> : <Loading what="queues" />}
      </main>
    );
  }
  const rows: QueueRow[] = data.list.queues.map((queue) => {
    const groups = data.groups.filter((group) => group.queueName === queue.name);
    return {
      name: queue.name,
      depth: queue.pending,
      lagMessages: Math.max(0, ...groups.map((group) => group.totalLag)),
      lagSeconds: Math.max(0, ...groups.map((group) => group.maxTimeLag)),
      deadLetters: queue.deadLetters,
      liveLeases: groups.reduce((sum, group) => sum + group.liveLeases, 0),
      groups: groups.length,
    };
  });
  rows.sort((a, b) => b.lagSeconds - a.lagSeconds || b.lagMessages - a.lagMessages || a.name.localeCompare(b.name));
  const lagging = data.groups
    .filter((group) => group.totalLag > 0)
    .sort((a, b) => b.maxTimeLag - a.maxTimeLag || b.totalLag - a.totalLag)
    .slice(0, 5);
  const totals = rows.reduce(
    (sum, row) => ({
      depth: sum.depth + row.depth,
      deadLetters: sum.deadLetters + row.deadLetters,
      leases: sum.leases + row.liveLeases,
    }),
    { depth: 0, deadLetters: 0, leases: 0 },
  );
  return (
    <main id="main">
      <PageTitle>Queues</PageTitle>
      <Problem error={error} />
      <section class="stats" aria-label="Totals">
        <Stat label="queues" value={count(rows.length)} />
        <Stat label="messages waiting" value={count(totals.depth)} />
        <Stat label="live leases" value={count(totals.leases)} />
        <Stat
          label="dead letters"
          value={count(totals.deadLetters)}
          tone={totals.deadLetters > 0 ? 'warn' : undefined}
        />
        <Stat
          label="retention lag"
          value={duration(data.list.retentionLagSeconds * 1000)}
          tone={data.list.retentionLagSeconds > RETENTION_LAG_WARN_SECONDS ? 'warn' : undefined}
        />
      </section>
      <HistoryPanel />
      {lagging.length > 0 && (
        <section aria-labelledby="lagging-title">
          <h2 id="lagging-title">Most behind</h2>
          <ul class="lagging">
            {lagging.map((group) => (
              <li key={`${group.queueName}/${group.name}`} class={group.state === 'Lagging' ? 'bad' : ''}>
                <a href={`#/queues/${encodeURIComponent(group.queueName)}/consumers`}>
                  <strong>{groupLabel(group.name)}</strong> on {group.queueName}
                </a>
                <span>
                  {count(group.totalLag)} messages, oldest {duration(group.maxTimeLag * 1000)}
                </span>
              </li>
            ))}
          </ul>
        </section>
      )}
      <h2 class="queues-title">All queues</h2>
      {rows.length === 0 ? (
        <p class="empty">
          No queues yet. Push a message (<code>POST /api/v1/push</code>) or create a queue with{' '}
          <code>POST /api/v1/configure</code>, and it shows up here.
        </p>
      ) : (
        <div class="table-wrap">
          <table class="queues">
            <caption class="visually-hidden">Queues, the most behind first</caption>
            <thead>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col" class="num">
                  Waiting
                </th>
                <th scope="col" class="num">
                  Consumer lag
                </th>
                <th scope="col" class="num">
                  Dead letters
                </th>
                <th scope="col" class="num">
                  Live leases
                </th>
                <th scope="col">Throughput (in / out)</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((row) => {
                const rates = ratesOf(row.name);
                return (
                  <tr key={row.name} data-queue={row.name}>
                    <th scope="row">
                      <a href={`#/queues/${encodeURIComponent(row.name)}`}>{row.name}</a>
                    </th>
                    <td class="num">{count(row.depth)}</td>
                    <td class={`num ${row.lagSeconds >= 60 ? 'bad' : ''}`}>
                      {row.groups === 0 ? (
                        <span class="muted">no consumers</span>
                      ) : (
                        <>
                          {count(row.lagMessages)} · {duration(row.lagSeconds * 1000)}
                        </>
                      )}
                    </td>
                    <td class={`num ${row.deadLetters > 0 ? 'warn' : ''}`}>{count(row.deadLetters)}</td>
                    <td class="num">{count(row.liveLeases)}</td>
                    <td class="throughput">
                      <Sparkline values={rates.in} label={`${row.name}: messages in per second`} />
                      <span>
                        {rate(rates.in.at(-1))} in · {rate(rates.out.at(-1))} out
                      </span>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {data.list.next && <p class="muted">Showing the first {rows.length} queues by name.</p>}
      <Quotas quotas={data.usage.quotas} />
    </main>
  );
}

const QUOTA_NAMES: Record<QuotaUse['quota'], string> = {
  queues: 'Queues',
  partitions: 'Partitions',
  consumerGroups: 'Consumer groups',
  storedBytes: 'Stored payload bytes',
  storedMessages: 'Stored messages, dead letters and stream state',
};

/** What this tenant uses of each quota; a write past a storage quota is refused with 403. */
function Quotas({ quotas }: { quotas: QuotaUse[] }) {
  const amount = (quota: QuotaUse, value: number) => (quota.quota === 'storedBytes' ? bytes(value) : count(value));
  return (
    <section aria-labelledby="quotas-title">
      <h2 id="quotas-title">Quotas</h2>
      <ul class="quotas">
        {quotas.map((quota) => {
          const share = quota.used !== null && quota.limit !== null ? quota.used / quota.limit : undefined;
          const tone = share === undefined ? '' : share >= 1 ? 'bad' : share >= 0.8 ? 'warn' : '';
          return (
            <li key={quota.quota} class={tone} data-quota={quota.quota}>
              <strong>{QUOTA_NAMES[quota.quota]}</strong>
              <code class="muted">{quota.variable}</code>
              <span class="quota-use">
                {quota.used === null ? 'not counted' : amount(quota, quota.used)} of{' '}
                {quota.limit === null ? 'no limit' : amount(quota, quota.limit)}
              </span>
              {share !== undefined && (
                <meter min={0} max={1} value={Math.min(share, 1)} aria-label={`${QUOTA_NAMES[quota.quota]} used`} />
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}
