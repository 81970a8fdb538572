import { useState } from 'preact/hooks';
import { QueueDetail } from '../api';
import { Pager } from '../components';
import { count, timestamp } from '../format';

const PAGE = 50;

export function Partitions({ detail }: { detail: QueueDetail }) {
  const [page, setPage] = useState(0);
  const pages = Math.ceil(detail.partitions.length / PAGE);
  const shown = detail.partitions.slice(page * PAGE, (page + 1) * PAGE);
  return (
    <section aria-labelledby="partitions-title">
      <h2 id="partitions-title">Partitions</h2>
      {detail.partitionsTruncated && (
        <p class="muted">
          The first {count(detail.partitions.length)} of {count(detail.partitionCount)} partitions, by name.
        </p>
      )}
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Partition</th>
              <th scope="col" class="num">
                Messages ever stored
              </th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((partition) => (
              <tr key={partition.id}>
                <th scope="row">{partition.name}</th>
                <td class="num">{count(partition.messages)}</td>
                <td>{timestamp(partition.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <Pager page={page} pages={pages} onPage={setPage} label="Partition pages" />
    </section>
  );
}
