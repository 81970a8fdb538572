import { ComponentChildren, createContext } from 'preact';
import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, WhoAmI } from './api';
import { Polled, refreshNow } from './refresh';

export interface Session extends WhoAmI {
  canRead: boolean;
  canWrite: boolean;
  isAdmin: boolean;
}

export const SessionContext = createContext<Session | undefined>(undefined);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('no session');
  return session;
}

export function sessionOf(who: WhoAmI): Session {
  const has = (...roles: string[]) => who.roles.some((role) => roles.includes(role));
  return {
    ...who,
    canRead: has('read-only', 'read-write', 'admin'),
    canWrite: has('read-write', 'admin'),
    isAdmin: has('admin'),
  };
}

export function Problem({ error }: { error: ApiError | undefined }) {
  if (!error) return null;
  return (
    <p class="problem" role="alert">
      {error.status ? `${error.status}: ` : ''}
      {error.message}
    </p>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" aria-busy="true">
      Loading {what}…
    </p>
  );
}

/** A polled panel's error, or "Loading…" until its first answer. */
export function PolledStatus<T>({ polled, what }: { polled: Polled<T>; what: string }) {
  return (
    <>
      <Problem error={polled.error} />
      {polled.data === undefined && !polled.error && <Loading what={what} />}
    </>
  );
}

/** A polled list: its status, then `empty` when it has no entries, else what `children` makes of it. */
export function PolledList<T>(props: {
  polled: Polled<T>;
  what: string;
  entries: (data: T) => unknown[];
  empty: ComponentChildren;
  children: (data: T) => ComponentChildren;
}) {
  const { data } = props.polled;
  return (
    <>
      <PolledStatus polled={props.polled} what={props.what} />
      {data !== undefined &&
        (props.entries(data).length === 0 ? <p class="empty">{props.empty}</p> : props.children(data))}
    </>
  );
}

/** A throughput line drawn from the samples the console itself took. */
export function Sparkline({ values, label }: { values: number[]; label: string }) {
  const width = 120;
  const height = 28;
  if (values.length < 2) {
    return <span class="muted spark-empty">collecting…</span>;
  }
  const max = Math.max(...values, 1);
  const step = width / (values.length - 1);
  const points = values.map(
    (value, i) => `${(i * step).toFixed(1)},${(height - 2 - (value / max) * (height - 4)).toFixed(1)}`,
  );
  return (
    <svg class="spark" viewBox={`0 0 ${width} ${height}`} width={width} height={height} role="img" aria-label={label}>
      <polyline points={points.join(' ')} fill="none" stroke="currentColor" stroke-width="1.5" />
    </svg>
  );
}

/**
 * A button that asks before it acts, in a modal dialog (Escape cancels), then
 * runs the action, shows its error if any and refreshes the page's data.
 */
export function ConfirmButton(props: {
  label: string;
  title: string;
  children: ComponentChildren;
  confirmLabel?: string;
  danger?: boolean;
  action: () => Promise<unknown>;
  done?: (result: unknown) => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const confirm = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const result = await props.action();
      dialog.current?.close();
      props.done?.(result);
      refreshNow();
    } catch (caught) {
      setError(caught instanceof ApiError ? caught : new ApiError(0, String(caught)));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class={props.danger ? 'danger' : ''} onClick={() => dialog.current?.showModal()}>
        {props.label}
      </button>
      <dialog ref={dialog} aria-labelledby={undefined} onClose={() => setError(undefined)}>
        <form method="dialog" onSubmit={(event) => event.preventDefault()}>
          <h3>{props.title}</h3>
          <div class="dialog-body">{props.children}</div>
          <Problem error={error} />
          <div class="actions">
            <button type="button" onClick={() => dialog.current?.close()}>
              Cancel
            </button>
            <button
              type="submit"
              class={props.danger ? 'danger' : 'primary'}
              disabled={busy}
              onClick={() => void confirm()}
            >
              {busy ? 'Working…' : (props.confirmLabel ?? props.label)}
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}

export function Pager(props: { page: number; pages: number; onPage: (page: number) => void; label: string }) {
  if (props.pages <= 1) return null;
  return (
    <nav class="pager" aria-label={props.label}>
      <button type="button" disabled={props.page === 0} onClick={() => props.onPage(props.page - 1)}>
        ← Previous
      </button>
      <span>
        Page {props.page + 1} of {props.pages}
      </span>
      <button type="button" disabled={props.page >= props.pages - 1} onClick={() => props.onPage(props.page + 1)}>
        Next →
      </button>
    </nav>
  );
}

export function Stat({ label, value, tone }: { label: string; value: ComponentChildren; tone?: 'warn' | 'bad' }) {
  return (
    <div class={`stat ${tone ?? ''}`}>
      <div class="stat-value">{value}</div>
      <div class="stat-label">{label}</div>
    </div>
  );
}

let pageLoaded = false;

/**
 * After a route change, focus goes to the new page's heading, where a
 * keyboard user expects it; on the page's first load it stays at the top.
 */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (pageLoaded) heading.current?.focus({ preventScroll: true });
    pageLoaded = true;
  }, []);
  return (
    <h1 ref={heading} tabIndex={-1}>
      {children}
    </h1>
  );
}
