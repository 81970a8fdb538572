import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api, ApiError, History, HistoryRange, q } from './api';
import { Problem } from './components';
import { count, duration, localZone } from './format';

/** The broker adds to its minute buckets about once a minute: reading more often shows nothing new. */
const RELOAD_MS = 30_000;
const RANGES: Array<{ range: HistoryRange; label: string }> = [
  { range: 'hour', label: 'Last hour' },
  { range: 'day', label: 'Last day' },
  { range: 'week', label: 'Last week' },
];

interface Line {
  label: string;
  color: string;
  values: Array<number | null>;
  /** On the second axis, at the right. */
  right?: boolean;
  dash?: number[];
}

/**
 * What the broker kept of the last hour, day or week (GET …/history): messages in, out, acked and dead-lettered per
 * step, and for one queue how many were waiting and the longest wait. Drawn with uPlot; read again every 30 s.
 */
export function HistoryPanel({ queue }: { queue?: string }) {
  const [range, setRange] = useState<HistoryRange>('hour');
  const [history, setHistory] = useState<History | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  const path =
    queue === undefined ? `/resources/history?range=${range}` : `/resources/queues/${q(queue)}/history?range=${range}`;
  useEffect(() => {
    let live = true;
    const load = () =>
      api<History>('GET', path).then(
        (loaded) => live && (setHistory(loaded), setError(undefined)),
        (failure: unknown) =>
          live && setError(failure instanceof ApiError ? failure : new ApiError(0, String(failure))),
      );
    void load();
    const timer = setInterval(() => void load(), RELOAD_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [path]);

  const shown = history?.range === range ? history : undefined;
  const perStep = shown ? `per ${shown.stepSeconds >= 3600 ? 'hour' : `${shown.stepSeconds / 60} min`}` : '';
  const totals = shown && {
    pushed: shown.points.reduce((sum, point) => sum + point.pushed, 0),
    popped: shown.points.reduce((sum, point) => sum + point.popped, 0),
    acked: shown.points.reduce((sum, point) => sum + point.acked, 0),
    deadLettered: shown.points.reduce((sum, point) => sum + point.deadLettered, 0),
  };
  return (
    <section class="history" aria-labelledby="history-title" data-range={range}>
      <div class="history-head">
        <h2 id="history-title">History</h2>
        <div class="segmented" role="group" aria-label="Time range">
          {RANGES.map((option) => (
            <button
              key={option.range}
              type="button"
              aria-pressed={range === option.range}
              onClick={() => setRange(option.range)}
            >
              {option.label}
            </button>
          ))}
        </div>
      </div>
      <Problem error={error} />
      {!shown ? (
        <p class="muted">Loading history…</p>
      ) : (
        <>
          <p class="history-totals" data-testid="history-totals">
            {count(totals!.pushed)} in · {count(totals!.popped)} out · {count(totals!.acked)} acked ·{' '}
            {count(totals!.deadLettered)} dead-lettered
          </p>
          <Chart
            title={`Messages ${perStep}`}
            history={shown}
            lines={[
              { label: 'in', color: 'var(--accent)', values: shown.points.map((point) => point.pushed) },
              { label: 'out', color: 'var(--ok)', values: shown.points.map((point) => point.popped) },
              // Dashed: acks often follow deliveries step for step, and would hide them.
              { label: 'acked', color: '#7c3aed', dash: [5, 4], values: shown.points.map((point) => point.acked) },
              { label: 'dead-lettered', color: 'var(--bad)', values: shown.points.map((point) => point.deadLettered) },
            ]}
            format={(value) => count(value)}
          />
          <Chart
            title={queue === undefined ? 'Longest wait of a delivered message' : 'Waiting, and the longest wait'}
            history={shown}
            lines={[
              ...(queue === undefined
                ? []
                : [{ label: 'waiting', color: 'var(--warn)', values: shown.points.map((point) => point.lag ?? null) }]),
              {
                label: 'longest wait (s)',
                color: 'var(--muted)',
                values: shown.points.map((point) => point.maxWaitSeconds),
                right: queue !== undefined,
              },
            ]}
            format={(value, line) => (line?.right || queue === undefined ? duration(value * 1000) : count(value))}
          />
          <p class="muted history-note">
            Times in {localZone()}. Kept by the broker in minute buckets for HISTORY_RETENTION_DAYS; the current step is
            still filling.
          </p>
        </>
      )}
    </section>
  );
}

function Chart(props: {
  title: string;
  history: History;
  lines: Line[];
  format: (value: number, line?: Line) => string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  const { history, lines, title, format } = props;
  const shape = `${lines.map((line) => line.label).join('|')}`;
  const data: uPlot.AlignedData = [
    history.points.map((point) => Date.parse(point.at) / 1000),
    ...lines.map((line) => line.values),
  ];

  useEffect(() => {
    const element = box.current!;
    const style = getComputedStyle(element);
    const color = (value: string) =>
      value.startsWith('var(') ? style.getPropertyValue(value.slice(4, -1)).trim() || '#888' : value;
    const axisColor = style.getPropertyValue('--muted').trim() || '#666';
    const grid = { stroke: style.getPropertyValue('--line').trim() || '#ddd', width: 1 };
    const right = lines.some((line) => line.right);
    const chart = new uPlot(
      {
        width: Math.max(280, element.clientWidth),
        height: 200,
        // Bars would suit counts per step, but lines read better over 168-288 steps and on a phone.
        series: [
          {},
          ...lines.map((line) => ({
            label: line.label,
            stroke: color(line.color),
            width: 1.5,
            dash: line.dash,
            scale: line.right ? 'right' : 'y',
            spanGaps: false,
            value: (_: uPlot, value: number | null) => (value === null ? '—' : format(value, line)),
          })),
        ],
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [
          { stroke: axisColor, grid },
          { stroke: axisColor, grid, size: 56, values: (_u, ticks) => ticks.map((tick) => format(tick, lines[0])) },
          ...(right
            ? [
                {
                  side: 1,
                  scale: 'right',
                  stroke: axisColor,
                  grid: { show: false },
                  size: 64,
                  values: (_u: uPlot, ticks: number[]) => ticks.map((tick) => duration(tick * 1000)),
                },
              ]
            : []),
        ],
        legend: { live: true },
        cursor: { drag: { x: false, y: false } },
      },
      data,
      element,
    );
    plot.current = chart;
    const resized = new ResizeObserver(() => chart.setSize({ width: Math.max(280, element.clientWidth), height: 200 }));
    resized.observe(element);
    return () => {
      resized.disconnect();
      chart.destroy();
      plot.current = undefined;
    };
  }, [shape]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [history]);

  const summary = lines
    .map((line) => {
      const known = line.values.filter((value): value is number => value !== null);
      return `${line.label}: ${known.length === 0 ? 'none' : `highest ${format(Math.max(...known), line)}`}`;
    })
    .join('; ');
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}. ${summary}`} />
    </figure>
  );
}
