import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { api, QueueDetail } from '../api';
import { ConfirmButton } from '../components';

const INT32_MAX = 2_147_483_647;

// Bounds as POST /configure validates them (src/queues/queue-options.ts); test/wire-types.e2e-spec.ts holds them to it.
const EDITABLE = [
  { key: 'leaseTime', label: 'Lease time (s)', hint: 'leaseSeconds of a pop that sends none', min: 1, max: INT32_MAX },
  {
    key: 'retryLimit',
    label: 'Retry limit',
    hint: 'failures redelivered before dead-lettering',
    min: 0,
    max: INT32_MAX,
  },
  {
    key: 'retryDelay',
    label: 'Retry delay (ms)',
    hint: 'a nacked or expired batch waits this long before it is offered again',
    min: 0,
    max: INT32_MAX,
  },
  {
    key: 'delayedProcessing',
    label: 'Delayed processing (s)',
    hint: 'a message is handed out this long after its push',
    min: 0,
    max: INT32_MAX,
  },
  {
    key: 'windowBuffer',
    label: 'Window buffer (s)',
    hint: 'a partition waits until its newest message is this old',
    min: 0,
    max: INT32_MAX,
  },
  { key: 'priority', label: 'Priority', hint: 'order of a discovery pop', min: -INT32_MAX, max: INT32_MAX },
] as const;

type Field = (typeof EDITABLE)[number];

/** Why the API would refuse this value, or undefined when it takes it. */
function refusal(field: Field, text: string): string | undefined {
  const value = Number(text);
  if (text.trim() !== '' && Number.isInteger(value) && value >= field.min && value <= field.max) return undefined;
  return field.min === 1
    ? `${field.label} must be a whole number of at least 1.`
    : field.min === 0
      ? `${field.label} must be a whole number, 0 or more.`
      : `${field.label} must be a whole number.`;
}

export function Settings({ detail }: { detail: QueueDetail }) {
  const [values, setValues] = useState<Record<string, string>>({});
  const [deadLetters, setDeadLetters] = useState<boolean | undefined>(undefined);
  const current = (key: string) => {
    const value = detail.options[key];
    return typeof value === 'number' ? String(value) : '0';
  };
  const changed: Record<string, unknown> = {};
  const refused: string[] = [];
  for (const field of EDITABLE) {
    const value = values[field.key];
    if (value === undefined || value === current(field.key)) continue;
    const why = refusal(field, value);
    if (why) refused.push(why);
    else changed[field.key] = Number(value);
  }
  if (deadLetters !== undefined && deadLetters !== detail.options.deadLetterQueue)
    changed.deadLetterQueue = deadLetters;
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Options</h2>
      <form class="settings" onSubmit={(event) => event.preventDefault()}>
        {EDITABLE.map(({ key, label, hint, min, max }) => (
          <label key={key}>
            {label}
            <input
              type="number"
              min={min}
              max={max}
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
        {refused.map((why) => (
          <p key={why} class="problem field-problem" role="alert">
            {why}
          </p>
        ))}
        <div class="actions">
          {refused.length > 0 ? (
            <span class="muted">Correct the values above to apply them.</span>
          ) : Object.keys(changed).length === 0 ? (
            <span class="muted" data-testid="settings-idle">
              Nothing changed yet. Apply appears when a value differs from the queue's, and asks before it saves.
            </span>
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
