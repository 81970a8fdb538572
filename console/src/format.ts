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
