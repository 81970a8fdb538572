import { useState } from 'preact/hooks';
import { api, DeadLetter, DeadLetterPage, q, query } from '../api';
import { ConfirmButton, Pager, PolledList, useSession } from '../components';
import { groupLabel, preview, timestamp } from '../format';
import { usePolled } from '../refresh';

const PAGE_SIZE = 50;

export function DeadLetters({ queue }: { queue: string }) {
  const [page, setPage] = useState(0);
  const path = `/dlq${query({ queue, limit: PAGE_SIZE, offset: page * PAGE_SIZE })}`;
  const letters = usePolled(() => api<DeadLetterPage>('GET', path), path);
  return (
    <section aria-labelledby="dlq-title">
      <h2 id="dlq-title">Dead letters</h2>
      <PolledList
        polled={letters}
        what="dead letters"
        entries={(found) => found.messages}
        empty="No dead letters: every message either succeeded or is still being retried."
      >
        {(found) => (
          <div class="table-wrap">
            <table class="dead-letters">
              <thead>
                <tr>
                  <th scope="col">Failed</th>
                  <th scope="col">Group</th>
                  <th scope="col">Partition</th>
                  <th scope="col">Error</th>
                  <th scope="col" class="num">
                    Retries
                  </th>
                  <th scope="col">Payload</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {found.messages.map((letter) => (
                  <DeadLetterRow key={letter.id} queue={queue} letter={letter} />
                ))}
              </tbody>
            </table>
          </div>
        )}
      </PolledList>
      <Pager
        page={page}
        pages={Math.ceil((letters.data?.total ?? 0) / PAGE_SIZE)}
        onPage={setPage}
        label="Dead-letter pages"
      />
    </section>
  );
}

function DeadLetterRow({ queue, letter }: { queue: string; letter: DeadLetter }) {
  const messagePath = `#/queues/${encodeURIComponent(queue)}/messages/${letter.partitionId}/${encodeURIComponent(
    letter.transactionId,
  )}`;
  return (
    <tr data-transaction={letter.transactionId}>
      <td>{timestamp(letter.failedAt)}</td>
      <td>{groupLabel(letter.consumerGroup)}</td>
      <td>{letter.partition}</td>
      <td class="error-text">{letter.errorMessage ?? <span class="muted">none given</span>}</td>
      <td class="num">{letter.retryCount}</td>
      <td>
        <a href={messagePath}>
          <code class="payload-preview">{preview(letter.data, 60)}</code>
        </a>
      </td>
      <td>
        <div class="row-actions">
          <DeadLetterActions
            partitionId={letter.partitionId}
            transactionId={letter.transactionId}
            consumerGroup={letter.consumerGroup}
          />
        </div>
      </td>
    </tr>
  );
}

export function DeadLetterActions(props: {
  partitionId: string;
  transactionId: string;
  consumerGroup: string;
  onDeleted?: () => void;
}) {
  const session = useSession();
  if (!session.canWrite) return null;
  const path = `/messages/${q(props.partitionId)}/${q(props.transactionId)}`;
  return (
    <>
      <ConfirmButton
        label="Retry"
        title="Deliver this message again?"
        action={() => api('POST', `${path}/retry${query({ consumerGroup: props.consumerGroup })}`)}
      >
        <p>
          A copy (transaction id <code>dlq:{props.transactionId}</code>) goes to the end of its partition, and{' '}
          <strong>{groupLabel(props.consumerGroup)}</strong>'s dead letter for it is removed. A message can be retried
          once.
        </p>
      </ConfirmButton>
      <ConfirmButton
        label="Delete"
        title="Delete this message?"
        danger
        action={() => api('DELETE', path)}
        done={props.onDeleted}
      >
        <p>
          The message and its dead letters in every group are deleted for good. A message under a live lease cannot be
          deleted.
        </p>
      </ConfirmButton>
    </>
  );
}
