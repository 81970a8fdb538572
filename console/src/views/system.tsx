import { api, MaintenanceState } from '../api';
import { ConfirmButton, PageTitle, PolledStatus } from '../components';
import { usePolled } from '../refresh';

export function SystemPage() {
  const state = usePolled(() => api<MaintenanceState>('GET', '/system/maintenance'), 'maintenance');
  return (
    <main id="main">
      <PageTitle>Maintenance</PageTitle>
      <p>Switches for this tenant only; other tenants on the broker are not affected.</p>
      <PolledStatus polled={state} what="the switches" />
      {state.data && (
        <ul class="switches">
          <Switch
            name="Pushes"
            on={state.data.maintenanceMode}
            path="/system/maintenance"
            effect="Pushes are refused with 503 and Retry-After until it is switched off; nothing is buffered."
          />
          <Switch
            name="Pops"
            on={state.data.popMaintenanceMode}
            path="/system/maintenance/pop"
            effect="Pops answer 204 without handing anything out; leases already held can still be extended and acked."
          />
        </ul>
      )}
    </main>
  );
}

function Switch(props: { name: string; on: boolean; path: string; effect: string }) {
  return (
    <li>
      <div>
        <strong>{props.name}</strong>{' '}
        <span class={`badge ${props.on ? 'bad' : 'ok'}`}>{props.on ? 'paused' : 'running'}</span>
        <p class="muted">{props.effect}</p>
      </div>
      <ConfirmButton
        label={props.on ? `Resume ${props.name.toLowerCase()}` : `Pause ${props.name.toLowerCase()}`}
        title={props.on ? `Resume ${props.name.toLowerCase()}?` : `Pause ${props.name.toLowerCase()} for this tenant?`}
        danger={!props.on}
        action={() => api('POST', props.path, { enabled: !props.on })}
      >
        <p>{props.effect}</p>
      </ConfirmButton>
    </li>
  );
}
