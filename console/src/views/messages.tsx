import { useState } from 'preact/hooks';
import { api, MessagePage, MessageStatus, query } from '../api';
import { PolledList } from '../components';
import { groupLabel, localInstant, localZone, preview, QUEUE_MODE_GROUP, timestamp } from '../format';
import { usePolled } from '../refresh';

const STATUSES: MessageStatus[] = ['pending', 'leased', 'completed', 'dead_letter'];
const PAGE_SIZE = 50;

interface Filters {
  partition: string;
  consumerGroup: string;
  status: string;
  from: string;
  to: string;
}

const NO_FILTERS: Filters = { partition: '', consumerGroup: '', status: '', from: '', to: '' };

const iso = (local: string) => localInstant(local)?.toISOString();

export function Messages({ queue, groups }: { queue: string; groups: string[] }) {
  const [draft, setDraft] = useState<Filters>(NO_FILTERS);
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  // Status is per group: by default the queue's first group's, which is what a reader of a queue with groups means.
  const group = filters.consumerGroup || groups[0] || '';
  const [cursors, setCursors] = useState<string[]>([]);
  const after = cursors[cursors.length - 1];
  const path = `/messages${query({
    queue,
    partition: filters.partition,
    consumerGroup: group,
    status: filters.status,
    from: iso(filters.from),
    to: iso(filters.to),
    limit: PAGE_SIZE,
    after,
  })}`;
  const page = usePolled(() => api<MessagePage>('GET', path), path);
  const field = (name: keyof Filters) => ({
    value: draft[name],
    onInput: (event: { currentTarget: { value: string } }) => setDraft({ ...draft, [name]: event.currentTarget.value }),
  });
  return (
    <section aria-labelledby="messages-title">
      <h2 id="messages-title">Messages</h2>
      <form
        class="filters"
        role="search"
        onSubmit={(event) => {
          event.preventDefault();
          setFilters(draft);
          setCursors([]);
        }}
      >
        <label>
          Partition
          <input name="partition" {...field('partition')} placeholder="any" />
        </label>
        <label>
          Status for group
          <select name="consumerGroup" {...field('consumerGroup')}>
            {[...groups, ...(groups.includes(QUEUE_MODE_GROUP) ? [] : [QUEUE_MODE_GROUP])].map((name) => (
              <option key={name} value={name === groups[0] ? '' : name}>
                {groupLabel(name)}
              </option>
            ))}
          </select>
        </label>
        <label>
          Status
          <select name="status" {...field('status')}>
            <option value="">any</option>
            {STATUSES.map((status) => (
              <option key={status} value={status}>
                {status.replace('_', ' ')}
              </option>
            ))}
          </select>
        </label>
        <label>
          From
          <input type="datetime-local" step="1" name="from" aria-describedby="filter-zone" {...field('from')} />
        </label>
        <label>
          Until
          <input type="datetime-local" step="1" name="to" aria-describedby="filter-zone" {...field('to')} />
        </label>
        <small class="muted zone" id="filter-zone" data-testid="time-zone">
          Times are in this browser's time zone, {localZone(localInstant(draft.from) ?? localInstant(draft.to))}.
        </small>
        <button type="submit" class="primary">
          Search
        </button>
      </form>
      <PolledList polled={page} what="messages" entries={(found) => found.messages} empty="No message matches.">
        {(found) => (
          <div class="table-wrap">
            <table class="messages">
              <thead>
                <tr>
                  <th scope="col">Created</th>
                  <th scope="col">Partition</th>
                  <th scope="col">Status</th>
                  <th scope="col">Transaction id</th>
                  <th scope="col">Payload</th>
                </tr>
              </thead>
              <tbody>
                {found.messages.map((message) => (
                  <tr key={message.id}>
                    <td>{timestamp(message.createdAt)}</td>
                    <td>{message.partition}</td>
                    <td>
                      <span class={`badge status-${message.status}`}>{message.status.replace('_', ' ')}</span>
                    </td>
                    <td>
                      <a
                        href={`#/queues/${encodeURIComponent(queue)}/messages/${message.partitionId}/${encodeURIComponent(
                          message.transactionId,
                        )}`}
                      >
                        {message.transactionId}
                      </a>
                    </td>
                    <td>
                      <code class="payload-preview">{preview(message.data)}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </PolledList>
      <nav class="pager" aria-label="Message pages">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          ← Newer
        </button>
        <button
          type="button"
          disabled={!page.data?.next}
          onClick={() => page.data?.next && setCursors([...cursors, page.data.next])}
        >
          Older →
        </button>
      </nav>
    </section>
  );
}
