const COUNT = new Intl.NumberFormat('en');

export const count = (value: number): string => COUNT.format(value);

const BYTE_UNITS = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];

export function bytes(value: number): string {
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${COUNT.format(value)} bytes` : `${value.toFixed(value < 10 ? 1 : 0)} ${BYTE_UNITS[unit]}`;
}

export function duration(ms: number): string {
  if (ms < 0) ms = 0;
  const seconds = ms / 1000;
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.floor(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${String(Math.floor(seconds % 60)).padStart(2, '0')} s`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${String(minutes % 60).padStart(2, '0')} min`;
  return `${Math.floor(hours / 24)} d`;
}

export function ago(iso: string | null, now = Date.now()): string {
  if (!iso) return '—';
  return `${duration(now - Date.parse(iso))} ago`;
}

export function timestamp(iso: string | null): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function rate(perSecond: number | undefined): string {
  if (perSecond === undefined) return '—';
  return perSecond >= 100 ? `${COUNT.format(Math.round(perSecond))}/s` : `${perSecond.toFixed(1)}/s`;
}

export function preview(data: unknown, max = 80): string {
  const text = typeof data === 'string' ? data : JSON.stringify(data);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function pretty(data: unknown): string {
  return typeof data === 'string' ? data : JSON.stringify(data, null, 2);
}

/** The group a pop without consumerGroup reads as; the API takes and returns this raw name. */
export const QUEUE_MODE_GROUP = '__QUEUE_MODE__';

export const groupLabel = (name: string): string => (name === QUEUE_MODE_GROUP ? 'queue mode (default)' : name);

/** The browser's time zone, which datetime-local inputs are read in, e.g. "Europe/Berlin (UTC+01:00)". */
export function localZone(at = new Date()): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const offset = -at.getTimezoneOffset();
  const abs = Math.abs(offset);
  const utc = `UTC${offset < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
  return zone ? `${zone} (${utc})` : utc;
}

/** A datetime-local value ("2026-12-05T04:30" or with seconds) as the instant it names in the browser's zone. */
export function localInstant(value: string): Date | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(value);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1).map((part) => Number(part ?? 0));
  const date = new Date(year, month - 1, day, hour, minute, second);
  return Number.isNaN(date.getTime()) ? undefined : date;
}
