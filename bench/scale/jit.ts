import { forceJit, resetJit, smallTenantsFirstPops } from '../jit-first-pop';
import { BigDatabase } from './big';
import { ADMIN_URL, count, LARGEST, ms, ScenarioResult, TENANT_HEADER, withClient } from './common';

/*
 * (4) No JIT on the hot path: with the big database's JIT thresholds forced to 0 (as a plan over the largest tenant's
 * statistics crosses the defaults), new small tenants each push one message, then their first pop (a new group) and
 * their queue listing are timed (bench/jit-first-pop.ts). The broker is restarted so its sessions see the settings.
 */

const TENANTS = 20;

export async function jit(big: BigDatabase): Promise<ScenarioResult> {
  await withClient(ADMIN_URL, (admin) => forceJit(admin, big.database));
  let measured: Awaited<ReturnType<typeof smallTenantsFirstPops>>;
  try {
    await big.restart();
    measured = await smallTenantsFirstPops(big.broker.base, TENANT_HEADER, TENANTS);
  } finally {
    await withClient(ADMIN_URL, (admin) => resetJit(admin, big.database));
    await big.restart();
  }
  return {
    outcomes: [
      {
        target: `a small tenant's first pop ≤ 50 ms p50 while another holds ${count(LARGEST)} partitions, JIT thresholds forced to 0`,
        measured: `${ms(measured.firstPopMs.p50)} p50, ${ms(measured.firstPopMs.p90)} p90; its GET /resources/queues ${ms(measured.listingMs.p50)} p50`,
        met: measured.firstPopMs.p50 <= 50,
      },
    ],
    curves: [],
    notes: [
      `jit: ${TENANTS} new tenants, one first pop each, jit=on with jit_above_cost, jit_inline_above_cost, jit_optimize_above_cost = 0 on the database.`,
    ],
  };
}
