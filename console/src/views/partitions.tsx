import { QueueDetail } from '../api';
import { Pager } from '../components';
import { count, timestamp } from '../format';

/** One page of the queue's partitions, as the broker pages them (QueuePage reads them a page at a time). */
export function Partitions(props: {
  detail: QueueDetail;
  page: number;
  pages: number;
  onPage: (page: number) => void;
}) {
  const { detail } = props;
  return (
    <section aria-labelledby="partitions-title">
      <h2 id="partitions-title">Partitions</h2>
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
            {detail.partitions.map((partition) => (
              <tr key={partition.id}>
                <th scope="row">{partition.name}</th>
                <td class="num">{count(partition.messages)}</td>
                <td>{timestamp(partition.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <Pager page={props.page} pages={props.pages} onPage={props.onPage} label="Partition pages" />
    </section>
  );
}
