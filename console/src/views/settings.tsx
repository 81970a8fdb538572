import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { api, QueueDetail } from '../api';
import { ConfirmButton } from '../components';

const EDITABLE = [
  { key: 'leaseTime', label: 'Lease time (s)', hint: 'leaseSeconds of a pop that sends none' },
  { key: 'retryLimit', label: 'Retry limit', hint: 'failures redelivered before dead-lettering' },
  {
    key: 'delayedProcessing',
    label: 'Delayed processing (s)',
    hint: 'a message is handed out this long after its push',
  },
  { key: 'windowBuffer', label: 'Window buffer (s)', hint: 'a partition waits until its newest message is this old' },
  { key: 'priority', label: 'Priority', hint: 'order of a discovery pop' },
] as const;

export function Settings({ detail }: { detail: QueueDetail }) {
  const [values, setValues] = useState<Record<string, string>>({});
  const [deadLetters, setDeadLetters] = useState<boolean | undefined>(undefined);
  const current = (key: string) => {
    const value = detail.options[key];
    return typeof value === 'number' ? String(value) : '0';
  };
  const changed: Record<string, unknown> = {};
  for (const { key } of EDITABLE) {
    if (values[key] !== undefined && values[key] !== current(key)) changed[key] = Number(values[key]);
  }
  if (deadLetters !== undefined && deadLetters !== detail.options.deadLetterQueue)
    changed.deadLetterQueue = deadLetters;
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Options</h2>
      <form class="settings" onSubmit={(event) => event.preventDefault()}>
        {EDITABLE.map(({ key, label, hint }) => (
          <label key={key}>
            {label}
            <input
              type="number"
              min={0}
              step={1}
              name={key}
              value={values[key] ?? current(key)}
              onInput={(event) => setValues({ ...values, [key]: event.currentTarget.value })}
            />
            <small class="muted">{hint}</small>
          </label>
        ))}
        <label class="check">
          <input
            type="checkbox"
            name="deadLetterQueue"
            checked={deadLetters ?? detail.options.deadLetterQueue === true}
            onChange={(event) => setDeadLetters(event.currentTarget.checked)}
          />
          Keep messages that use up their retries as dead letters
        </label>
        <div class="actions">
          {Object.keys(changed).length === 0 ? (
            <span class="muted">Change a value to apply it.</span>
          ) : (
            <ConfirmButton
              label="Apply"
              title={`Change ${detail.name}'s options?`}
              action={() => api('POST', '/configure', { queue: detail.name, options: changed })}
              done={() => {
                setValues({});
                setDeadLetters(undefined);
              }}
            >
              <pre class="payload">{JSON.stringify(changed, null, 2)}</pre>
            </ConfirmButton>
          )}
        </div>
      </form>
      <h2>Retention in force</h2>
      <dl class="facts">
        {Object.entries(detail.retention).map(([key, value]) => (
          <Fragment key={key}>
            <dt>{key}</dt>
            <dd>{String(value)}</dd>
          </Fragment>
        ))}
      </dl>
      <p class="muted">
        Namespace {detail.namespace ?? '—'}, task {detail.task ?? '—'}. Retention is set with{' '}
        <code>POST /api/v1/configure</code> (docs/retention.md).
      </p>
    </section>
  );
}
