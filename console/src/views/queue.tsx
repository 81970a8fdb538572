import { useEffect, useState } from 'preact/hooks';
import { api, GroupSummary, q, QueueDetail } from '../api';
import { Loading, PageTitle, Problem, Stat, useSession } from '../components';
import { count } from '../format';
import { HistoryPanel } from '../history';
import { usePolled } from '../refresh';
import { record } from '../throughput';
import { Consumers } from './consumers';
import { DeadLetters } from './dead-letters';
import { Messages } from './messages';
import { Partitions } from './partitions';
import { Settings } from './settings';

export const QUEUE_TABS = ['partitions', 'consumers', 'messages', 'dead-letters', 'settings'] as const;
export type QueueTab = (typeof QUEUE_TABS)[number];

const TAB_LABELS: Record<QueueTab, string> = {
  partitions: 'Partitions',
  consumers: 'Consumers & leases',
  messages: 'Messages',
  'dead-letters': 'Dead letters',
  settings: 'Settings',
};

export interface QueueData {
  detail: QueueDetail;
  groups: GroupSummary[];
}

/** Partitions per page, read from the broker a page at a time: a queue can hold millions. */
export const PARTITION_PAGE = 50;

export function QueuePage({ name, tab }: { name: string; tab: QueueTab }) {
  const session = useSession();
  // The `after` of each page reached so far: pages are keyset pages, so a page is reached from the one before it.
  const [afters, setAfters] = useState<Array<string | undefined>>([undefined]);
  const [page, setPage] = useState(0);
  useEffect(() => {
    setAfters([undefined]);
    setPage(0);
  }, [name]);
  const after = afters[page];
  const polled = usePolled(async () => {
    const [detail, groups] = await Promise.all([
      api<QueueDetail>(
        'GET',
        `/resources/queues/${q(name)}?limit=${PARTITION_PAGE}${after === undefined ? '' : `&after=${q(after)}`}`,
      ),
      api<GroupSummary[]>('GET', `/consumer-groups?queue=${q(name)}`),
    ]);
    record([detail]);
    const next = detail.partitionsNext;
    if (next !== null) setAfters((known) => (known[page + 1] === next ? known : [...known.slice(0, page + 1), next]));
    return { detail, groups };
  }, `queue:${name}:${page}`);
  const tabs = QUEUE_TABS.filter((candidate) => candidate !== 'settings' || session.isAdmin);
  const { data, error } = polled;
  return (
    <main id="main">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="#/">Queues</a> <span aria-hidden="true">/</span> <span>{name}</span>
      </nav>
      <PageTitle>{name}</PageTitle>
      <Problem error={error} />
      {data && (
        <section class="stats" aria-label="Queue totals">
          <Stat label="waiting" value={count(data.detail.pending)} />
          <Stat label="stored" value={count(data.detail.retained)} />
          <Stat label="partitions" value={count(data.detail.partitionCount)} />
          <Stat label="consumer groups" value={count(data.detail.consumerGroupCount)} />
          <Stat
            label="dead letters"
            value={count(data.detail.deadLetters)}
            tone={data.detail.deadLetters > 0 ? 'warn' : undefined}
          />
        </section>
      )}
      <HistoryPanel queue={name} key={name} />
      <nav class="tabs" aria-label="Queue sections">
        {tabs.map((candidate) => (
          <a
            key={candidate}
            href={`#/queues/${encodeURIComponent(name)}/${candidate}`}
            aria-current={candidate === tab ? 'page' : undefined}
          >
            {TAB_LABELS[candidate]}
          </a>
        ))}
      </nav>
      {!data && !error && <Loading what="the queue" />}
      {data && tab === 'partitions' && (
        <Partitions
          detail={data.detail}
          page={page}
          pages={Math.ceil(data.detail.partitionCount / PARTITION_PAGE)}
          onPage={(wanted) => wanted < afters.length && setPage(wanted)}
        />
      )}
      {data && tab === 'consumers' && <Consumers queue={name} data={data} />}
      {tab === 'messages' && <Messages queue={name} groups={data?.groups.map((group) => group.name) ?? []} />}
      {tab === 'dead-letters' && <DeadLetters queue={name} />}
      {data && tab === 'settings' && session.isAdmin && <Settings detail={data.detail} />}
    </main>
  );
}
