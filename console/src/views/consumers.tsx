import { useId, useState } from 'preact/hooks';
import { api, LeaseList, q } from '../api';
import { ConfirmButton, PolledList, useSession } from '../components';
import { count, duration, groupLabel, localInstant, localZone } from '../format';
import { usePolled, useTicker } from '../refresh';
import { QueueData } from './queue';

export function Consumers({ queue, data }: { queue: string; data: QueueData }) {
  const session = useSession();
  const leases = usePolled(() => api<LeaseList>('GET', `/resources/queues/${q(queue)}/leases`), `leases:${queue}`);
  const groups = [...data.groups].sort((a, b) => b.maxTimeLag - a.maxTimeLag || a.name.localeCompare(b.name));
  return (
    <>
      <section aria-labelledby="groups-title">
        <h2 id="groups-title">Consumer groups</h2>
        {groups.length === 0 ? (
          <p class="empty">No group has popped from this queue yet.</p>
        ) : (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Group</th>
                  <th scope="col" class="num">
                    Lag
                  </th>
                  <th scope="col" class="num">
                    Oldest unconsumed
                  </th>
                  <th scope="col" class="num">
                    Partitions behind
                  </th>
                  <th scope="col" class="num">
                    Live leases
                  </th>
                  <th scope="col">State</th>
                  {session.canWrite && <th scope="col">Seek</th>}
                </tr>
              </thead>
              <tbody>
                {groups.map((group) => (
                  <tr key={group.name} data-group={group.name}>
                    <th scope="row">{groupLabel(group.name)}</th>
                    <td class="num">{count(group.totalLag)}</td>
                    <td class="num">{duration(group.maxTimeLag * 1000)}</td>
                    <td class="num">
                      {count(group.partitionsWithLag)} of {count(group.partitions)}
                    </td>
                    <td class="num">{count(group.liveLeases)}</td>
                    <td>
                      <span class={`badge ${group.state === 'Lagging' ? 'bad' : 'ok'}`}>{group.state}</span>
                    </td>
                    {session.canWrite && (
                      <td>
                        <div class="row-actions">
                          <SeekButtons queue={queue} group={group.name} />
                        </div>
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <section aria-labelledby="leases-title">
        <h2 id="leases-title">Live leases</h2>
        <PolledList
          polled={leases}
          what="leases"
          entries={(list) => list.leases}
          empty="No lease is live: nothing of this queue is being worked on right now."
        >
          {(list) => <LeaseTable list={list} receivedAt={leases.receivedAt} />}
        </PolledList>
      </section>
    </>
  );
}

function LeaseTable({ list, receivedAt }: { list: LeaseList; receivedAt: number }) {
  const now = useTicker(250);
  // Time left counts down on the database's clock: what the answer said, less what passed since it came.
  const elapsed = now - receivedAt;
  return (
    <div class="table-wrap">
      <table class="leases">
        <thead>
          <tr>
            <th scope="col">Group</th>
            <th scope="col">Partition</th>
            <th scope="col">Lease</th>
            <th scope="col" class="num">
              Epoch
            </th>
            <th scope="col" class="num">
              Messages
            </th>
            <th scope="col">Time left</th>
            <th scope="col" class="num">
              Renewals
            </th>
            <th scope="col" class="num">
              Last renewal slack
            </th>
            <th scope="col" class="num">
              Attempt
            </th>
          </tr>
        </thead>
        <tbody>
          {list.leases.map((lease) => {
            const left = Math.max(0, lease.remainingMs - elapsed);
            const tight = lease.lastRenewalSlackMs !== null && lease.lastRenewalSlackMs < 1_000;
            return (
              <tr key={`${lease.partitionId}/${lease.consumerGroup}`} data-lease={lease.leaseIdHint}>
                <td>{groupLabel(lease.consumerGroup)}</td>
                <td>{lease.partition}</td>
                <td>
                  <code title="The lease id's last characters; the id itself is never shown">{lease.leaseIdHint}</code>
                </td>
                <td class="num">{lease.epoch}</td>
                <td class="num">{count(lease.messages)}</td>
                <td class={left < 5_000 ? 'bad' : ''} data-testid="time-left" data-ms={Math.round(left)}>
                  {left === 0 ? 'expiring' : duration(left)}
                </td>
                <td class="num" data-testid="renewals">
                  {count(lease.renewals)}
                </td>
                <td class={`num ${tight ? 'bad' : ''}`}>
                  {lease.lastRenewalSlackMs === null ? '—' : duration(lease.lastRenewalSlackMs)}
                </td>
                <td class="num">{lease.deliveryAttempt}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {list.truncated && <p class="muted">The {list.leases.length} leases closest to expiry.</p>}
    </div>
  );
}

function SeekButtons({ queue, group }: { queue: string; group: string }) {
  const [when, setWhen] = useState('');
  const path = `/consumer-groups/${q(group)}/queues/${q(queue)}/seek`;
  const label = groupLabel(group);
  const instant = localInstant(when);
  const zoneId = useId();
  return (
    <>
      <ConfirmButton
        label="To end"
        title={`Move ${label} to the end of ${queue}?`}
        confirmLabel="Skip everything"
        danger
        action={() => api('POST', path, { toEnd: true })}
      >
        <p>
          Every message of <strong>{queue}</strong> not yet consumed by <strong>{label}</strong> is skipped, and its
          live leases end. Nothing is deleted: seek back to a time to read them again.
        </p>
      </ConfirmButton>
      <ConfirmButton
        label="To time…"
        title={`Move ${label} to a point in time on ${queue}`}
        confirmLabel="Seek"
        action={() => {
          if (!instant) return Promise.reject(new Error('choose a date and time'));
          return api('POST', path, { timestamp: instant.toISOString() });
        }}
      >
        <label>
          Consume again from messages pushed at or after
          <input
            type="datetime-local"
            step="1"
            value={when}
            aria-describedby={zoneId}
            onInput={(event) => setWhen(event.currentTarget.value)}
          />
        </label>
        <p class="muted" id={zoneId} data-testid="time-zone">
          In this browser's time zone, {localZone(instant)}
          {instant && `: ${instant.toISOString().replace('.000Z', 'Z')} in UTC`}.
        </p>
        <p class="muted">The group's live leases on this queue end.</p>
      </ConfirmButton>
    </>
  );
}
