import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as echarts from 'echarts';
import { count, Curve } from './common';

/** Each curve as an SVG of Apache ECharts' server-side renderer (no browser, no native code). */
export function renderCurve(curve: Curve, folder: string): string {
  mkdirSync(folder, { recursive: true });
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: 720, height: 400 });
  chart.setOption({
    animation: false,
    backgroundColor: '#ffffff',
    title: { text: curve.title, left: 'center', textStyle: { fontSize: 14 } },
    legend: { bottom: 0 },
    grid: { left: 70, right: 30, top: 50, bottom: 70 },
    xAxis: {
      type: curve.logX ? 'log' : 'value',
      name: curve.xName,
      nameLocation: 'middle',
      nameGap: 28,
      axisLabel: { formatter: (value: number) => count(value) },
    },
    yAxis: { type: 'value', name: curve.yName },
    series: curve.series.map((series, index) => ({
      name: series.name,
      type: 'line',
      symbolSize: 7,
      data: series.points.filter(([, y]) => Number.isFinite(y)),
      label: { show: true, formatter: ({ value }: { value: [number, number] }) => format(value[1]) },
      ...(index === 0 && curve.limit
        ? {
            markLine: {
              symbol: 'none',
              lineStyle: { type: 'dashed', color: '#c23531' },
              label: { formatter: `${curve.limit.name} ${curve.limit.value}` },
              data: [{ yAxis: curve.limit.value }],
            },
          }
        : {}),
    })),
  });
  const svg = chart.renderToSVGString();
  chart.dispose();
  const file = join(folder, `${curve.file}.svg`);
  writeFileSync(file, svg);
  return file;
}

function format(value: number): string {
  return value >= 100 ? String(Math.round(value)) : value.toFixed(1);
}
