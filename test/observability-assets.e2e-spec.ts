import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { createTestApp } from './support/test-app';

const ROOT = join(__dirname, '..');

/** Every series name the broker can export: histograms as their _bucket, _sum and _count. */
function exportedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const match of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = match;
    if (type === 'histogram') ['_bucket', '_sum', '_count'].forEach((suffix) => names.add(`${name}${suffix}`));
    else if (type === 'summary') ['', '_sum', '_count'].forEach((suffix) => names.add(`${name}${suffix}`));
    else names.add(name);
  }
  return names;
}

const referenced = (expressions: string[]): string[] => [
  ...new Set(expressions.flatMap((expression) => expression.match(/\bleasehold_[a-z0-9_]+/g) ?? [])),
];

describe('the Grafana dashboard and the Prometheus alerts in deploy/', () => {
  let app: NestExpressApplication;
  let exported: Set<string>;

  beforeAll(async () => {
    app = await createTestApp();
    exported = exportedNames((await request(app.getHttpServer()).get('/metrics').expect(200)).text);
  });

  afterAll(async () => {
    await app.close();
  });

  it('the dashboard is valid JSON whose every query names only metrics the broker exports', () => {
    const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana/leasehold-dashboard.json'), 'utf8'));
    const expressions: string[] = dashboard.panels.flatMap((panel: { targets: Array<{ expr: string }> }) =>
      panel.targets.map((target) => target.expr),
    );

    expect(expressions.length).toBeGreaterThanOrEqual(15);
    expect(referenced(expressions).filter((name) => !exported.has(name))).toEqual([]);
  });

  it('the alert rules name only metrics the broker exports, and cover what operators must hear of', () => {
    const rules = readFileSync(join(ROOT, 'deploy/prometheus/leasehold-alerts.yml'), 'utf8');
    // An expression runs from `expr:` to the next key of the rule (folded `>` blocks included).
    const expressions = [...rules.matchAll(/^\s+expr:([\s\S]*?)(?=^\s+(?:for|labels|annotations):)/gm)].map(
      (match) => match[1],
    );
    const alerts = [...rules.matchAll(/^\s+- alert: (\S+)$/gm)].map((match) => match[1]);

    expect(expressions).toHaveLength(alerts.length);
    expect(alerts).toEqual(
      expect.arrayContaining([
        'LeaseholdLeasesLost',
        'LeaseholdRenewalSlackLow',
        'LeaseholdConsumerLagGrowing',
        'LeaseholdDeadLettersGrowing',
        'LeaseholdPoolSaturated',
        'LeaseholdListenerDisconnected',
      ]),
    );
    expect(referenced(expressions).filter((name) => !exported.has(name))).toEqual([]);
  });
});
