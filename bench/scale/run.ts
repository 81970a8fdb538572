import { execSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { basename, join } from 'node:path';
import { BigDatabase, prepareBig } from './big';
import { brokers } from './brokers';
import { renderCurve } from './charts';
import { claims } from './claims';
import { cleanUp, dropDatabase, Outcome, ROOT, ROUNDS, ScenarioResult, SIZES } from './common';
import { groups } from './groups';
import { jit } from './jit';
import { observation } from './observation';
import { polls } from './polls';
import { retention } from './retention';
import { tenants } from './tenants';

/*
 * `npm run bench:scale`: every target of "flat at a million partitions and ten thousand tenants", measured from
 * outside against brokers started as `npm start` starts them. BENCH_SCALE_SIZES (partitions per queue, default
 * 100,10000,100000,1000000), BENCH_SCALE_ROUNDS (3), BENCH_SCALE_SCENARIO (a `|`-separated subset of the names below),
 * BENCH_SCALE_KEEP=1 (keep the databases).
 * Prints the table and writes bench/charts/*.svg and bench/scale-results.json; drops what it created at its end.
 */

type Scenario = [name: string, usesBig: boolean, run: (big: BigDatabase) => Promise<ScenarioResult>];

const SCENARIOS: Scenario[] = [
  ['groups', true, groups],
  ['claims', true, claims],
  ['jit', true, jit],
  ['observation', true, observation],
  ['retention', false, () => retention()],
  ['tenants', false, () => tenants()],
  ['polls', false, () => polls()],
  ['brokers', false, () => brokers()],
];

const log = (line: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

async function main(): Promise<void> {
  const wanted = process.env.BENCH_SCALE_SCENARIO?.split('|').map((name) => name.trim());
  const chosen = SCENARIOS.filter(([name]) => !wanted || wanted.includes(name));
  if (chosen.length === 0) throw new Error(`no scenario named ${wanted?.join(', ')}`);
  const started = performance.now();
  const load = loadavg()[0];
  const results: Array<{ name: string; result?: ScenarioResult; error?: string; seconds: number }> = [];
  let big: BigDatabase | undefined;
  const seedNotes: string[] = [];
  try {
    for (const [name, usesBig, run] of chosen) {
      const begun = performance.now();
      log(`${name}...`);
      try {
        if (usesBig && !big) {
          big = await prepareBig(log);
          seedNotes.push(
            `seeding: ${big.partitions.toLocaleString('en')} partitions (each with one consumed message, 10 groups per queue) written by SQL and vacuumed in ${big.seedSeconds.toFixed(0)} s; checked through HTTP (a drained queue answers 204, a push to a new partition is popped once and acked)${big.checkFailures.length ? `; checks that failed: ${big.checkFailures.join('; ')}` : ''}.`,
          );
        }
        const result = await run(big as BigDatabase);
        results.push({ name, result, seconds: (performance.now() - begun) / 1000 });
      } catch (error) {
        // fetch's own message says nothing; its cause does.
        const said = `${String(error)}${error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : ''}`;
        log(`${name} failed: ${said}`);
        results.push({ name, error: said.slice(0, 300), seconds: (performance.now() - begun) / 1000 });
      }
      log(`${name} done in ${((performance.now() - begun) / 1000).toFixed(0)} s`);
      if (big && !chosen.slice(chosen.findIndex(([other]) => other === name) + 1).some(([, other]) => other)) {
        await big.broker.stop();
        await dropDatabase(big.database);
        big = undefined;
      }
    }
  } finally {
    await cleanUp();
  }
  const chartsFolder = join(ROOT, 'bench', 'charts');
  const charts: string[] = [];
  for (const { result } of results)
    for (const curve of result?.curves ?? []) charts.push(renderCurve(curve, chartsFolder));
  const commit = execSync('git rev-parse --short HEAD', { cwd: ROOT }).toString().trim();
  const header = `commit ${commit}, sizes ${SIZES.join(', ')}, ${ROUNDS} rounds, ${cpus().length} cores, load ${load.toFixed(2)} at start / ${loadavg()[0].toFixed(2)} at end, ${((performance.now() - started) / 60_000).toFixed(1)} min`;
  const rows: string[] = ['| scenario | target | measured | met? |', '| --- | --- | --- | --- |'];
  for (const { name, result, error } of results) {
    if (error) rows.push(`| ${name} | (all of its targets) | failed: ${error.replace(/\|/g, '/')} | not measured |`);
    for (const outcome of result?.outcomes ?? []) rows.push(row(name, outcome));
  }
  const notes = [...seedNotes, ...results.flatMap(({ result }) => result?.notes ?? [])];
  const report = [
    `Run ${new Date().toISOString()}: ${header}.`,
    '',
    ...rows,
    '',
    ...notes.map((note) => `- ${note}`),
    '',
    ...charts.map((chart) => `![${basename(chart, '.svg')}](charts/${basename(chart)})`),
    '',
  ].join('\n');
  console.log(report);
  // The last run, for bench/RESULTS.md (which links the same charts); the raw figures beside it.
  writeFileSync(join(ROOT, 'bench', 'scale-results.md'), report);
  writeFileSync(join(ROOT, 'bench', 'scale-results.json'), `${JSON.stringify({ header, results }, null, 2)}\n`);
}

function row(name: string, outcome: Outcome): string {
  const met = outcome.met === undefined ? 'not judged' : outcome.met ? '**met**' : '**not met**';
  return `| ${name} | ${outcome.target} | ${outcome.measured.replace(/\|/g, '/')} | ${met} |`;
}

const stop = () => {
  log('interrupted: cleaning up');
  void cleanUp().finally(() => process.exit(130));
};
process.once('SIGINT', stop);
// A request left behind by a failed scenario must not end the run before its clean-up.
process.on('unhandledRejection', (error) => log(`unhandled: ${String(error)}`));
process.once('SIGTERM', stop);

main().catch(async (error: unknown) => {
  console.error(error);
  await cleanUp();
  process.exit(1);
});
