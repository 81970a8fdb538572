import { api, MessageDetail, MessageTrace, q } from '../api';
import { PageTitle, PolledList, PolledStatus } from '../components';
import { groupLabel, pretty, timestamp } from '../format';
import { usePolled } from '../refresh';
import { DeadLetterActions } from './dead-letters';

export function MessagePage(props: { queue: string; partitionId: string; transactionId: string }) {
  const back = `#/queues/${encodeURIComponent(props.queue)}/messages`;
  const message = usePolled(
    () => api<MessageDetail>('GET', `/messages/${q(props.partitionId)}/${q(props.transactionId)}`),
    `message:${props.partitionId}/${props.transactionId}`,
  );
  const traces = usePolled(
    () => api<{ traces: MessageTrace[] }>('GET', `/traces/${q(props.partitionId)}/${q(props.transactionId)}`),
    `traces:${props.partitionId}/${props.transactionId}`,
  );
  const data = message.data;
  return (
    <main id="main">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="#/">Queues</a> <span aria-hidden="true">/</span>{' '}
        <a href={`#/queues/${encodeURIComponent(props.queue)}`}>{props.queue}</a> <span aria-hidden="true">/</span>{' '}
        <a href={back}>Messages</a>
      </nav>
      <PageTitle>Message {props.transactionId}</PageTitle>
      <PolledStatus polled={message} what="the message" />
      {data && (
        <>
          <dl class="facts">
            <dt>Partition</dt>
            <dd>{data.partition}</dd>
            <dt>Message id</dt>
            <dd>
              <code>{data.id}</code>
            </dd>
            <dt>Created</dt>
            <dd>{timestamp(data.createdAt)}</dd>
            <dt>Trace id</dt>
            <dd>{data.traceId ?? '—'}</dd>
            <dt>Pushed by</dt>
            <dd>{data.producerSub ?? '—'}</dd>
          </dl>
          <section aria-labelledby="payload-title">
            <h2 id="payload-title">Payload</h2>
            <pre class="payload" tabIndex={0}>
              {pretty(data.data)}
            </pre>
          </section>
          <section aria-labelledby="delivery-title">
            <h2 id="delivery-title">Delivery per consumer group</h2>
            {data.groups.length === 0 ? (
              <p class="empty">No group has a cursor on this partition yet.</p>
            ) : (
              <div class="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Group</th>
                      <th scope="col">Status</th>
                      <th scope="col" class="num">
                        Delivery attempt
                      </th>
                      <th scope="col">Lease</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.groups.map((group) => (
                      <tr key={group.consumerGroup}>
                        <th scope="row">{groupLabel(group.consumerGroup)}</th>
                        <td>
                          <span class={`badge status-${group.status}`}>{group.status.replace('_', ' ')}</span>
                        </td>
                        <td class="num">{group.deliveryAttempt}</td>
                        <td>
                          {group.leaseActive
                            ? `epoch ${group.leaseEpoch}, until ${timestamp(group.leaseExpiresAt)}`
                            : 'none'}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </section>
          {data.deadLetters.length > 0 && (
            <section aria-labelledby="letters-title">
              <h2 id="letters-title">Dead letters</h2>
              <div class="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Group</th>
                      <th scope="col">Failed</th>
                      <th scope="col">Error</th>
                      <th scope="col" class="num">
                        Retries
                      </th>
                      <th scope="col">
                        <span class="visually-hidden">Actions</span>
                      </th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.deadLetters.map((letter) => (
                      <tr key={letter.consumerGroup}>
                        <th scope="row">{groupLabel(letter.consumerGroup)}</th>
                        <td>{timestamp(letter.failedAt)}</td>
                        <td class="error-text">{letter.errorMessage ?? '—'}</td>
                        <td class="num">{letter.retryCount}</td>
                        <td>
                          <div class="row-actions">
                            <DeadLetterActions
                              partitionId={data.partitionId}
                              transactionId={data.transactionId}
                              consumerGroup={letter.consumerGroup}
                              onDeleted={() => (location.hash = back)}
                            />
                          </div>
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </section>
          )}
          <section aria-labelledby="traces-title">
            <h2 id="traces-title">Traces</h2>
            <PolledList
              polled={traces}
              what="the traces"
              entries={(found) => found.traces}
              empty="No worker has recorded a trace on this message."
            >
              {(found) => (
                <ol class="timeline">
                  {found.traces.map((trace) => (
                    <li key={trace.id}>
                      <p class="timeline-head">
                        <span class="badge">{trace.event_type}</span> <time>{timestamp(trace.created_at)}</time>{' '}
                        {groupLabel(trace.consumer_group)}
                        {trace.trace_names.length > 0 && (
                          <span class="timeline-names"> · {trace.trace_names.join(', ')}</span>
                        )}
                      </p>
                      <pre class="payload" tabIndex={0}>
                        {pretty(trace.data)}
                      </pre>
                    </li>
                  ))}
                </ol>
              )}
            </PolledList>
          </section>
        </>
      )}
    </main>
  );
}
