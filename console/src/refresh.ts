import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

/**
 * One refresh cycle for the whole page: every panel on screen is a task of
 * the same timer, a cycle never starts while the last one runs, errors back
 * off, and a hidden tab refreshes rarely.
 */
const VISIBLE_MS = 2_000;
const HIDDEN_MS = 30_000;
const MAX_BACKOFF_MS = 30_000;

type Task = () => Promise<boolean>;
const tasks = new Set<Task>();
let timer: ReturnType<typeof setTimeout> | undefined;
let running = false;
let failures = 0;

function delay(): number {
  const base = document.hidden ? HIDDEN_MS : VISIBLE_MS;
  return failures === 0 ? base : Math.min(MAX_BACKOFF_MS, Math.max(base, VISIBLE_MS * 2 ** failures));
}

function schedule(): void {
  clearTimeout(timer);
  if (tasks.size > 0) timer = setTimeout(() => void cycle(), delay());
}

async function cycle(): Promise<void> {
  if (running) return;
  running = true;
  clearTimeout(timer);
  const results = await Promise.all([...tasks].map((task) => task()));
  failures = results.every(Boolean) ? 0 : failures + 1;
  running = false;
  schedule();
}

document.addEventListener('visibilitychange', () => (document.hidden ? schedule() : void cycle()));

/** After a change the user made: show its effect now rather than at the next tick. */
export function refreshNow(): void {
  void cycle();
}

export interface Polled<T> {
  data: T | undefined;
  error: ApiError | undefined;
  /** Date.now() when data arrived. */
  receivedAt: number;
}

/** Data for one panel, loaded at once and then with every cycle; `key` names what is loaded. */
export function usePolled<T>(load: () => Promise<T>, key: string): Polled<T> {
  const [state, setState] = useState<Polled<T>>({ data: undefined, error: undefined, receivedAt: 0 });
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    let live = true;
    setState({ data: undefined, error: undefined, receivedAt: 0 });
    const task: Task = async () => {
      try {
        const data = await latest.current();
        if (live) setState({ data, error: undefined, receivedAt: Date.now() });
        return true;
      } catch (error) {
        const failure = error instanceof ApiError ? error : new ApiError(0, String(error));
        if (live) setState((previous) => ({ ...previous, error: failure }));
        return false;
      }
    };
    tasks.add(task);
    void task().then(schedule);
    return () => {
      live = false;
      tasks.delete(task);
      if (tasks.size === 0) clearTimeout(timer);
    };
  }, [key]);
  return state;
}

/** Re-renders every `ms` while mounted, for countdowns; it sends no request. */
export function useTicker(ms: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const id = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(id);
  }, [ms]);
  return now;
}
