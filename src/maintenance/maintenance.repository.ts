import { Injectable } from '@nestjs/common';
import { shared, sql, Statement, statement } from '../database/statement';

export interface MaintenanceSwitches {
  pushesPaused: boolean;
  popsPaused: boolean;
}

interface SwitchRow {
  pushes_paused: boolean;
  pops_paused: boolean;
}

@Injectable()
export class MaintenanceRepository {
  /** A tenant without a row has nothing paused. */
  switches(tenantId: string): Statement<MaintenanceSwitches> {
    return statement(
      sql`SELECT pushes_paused, pops_paused FROM maintenance WHERE tenant_id = ${tenantId}`,
      ([row]: SwitchRow[]) => ({ pushesPaused: row?.pushes_paused ?? false, popsPaused: row?.pops_paused ?? false }),
    );
  }

  /** A switch left undefined keeps its value (false for a tenant's first). */
  set(tenantId: string, switches: { pushes?: boolean; pops?: boolean }): Statement<MaintenanceSwitches> {
    const pushes = shared(switches.pushes ?? null);
    const pops = shared(switches.pops ?? null);
    return statement(
      sql`INSERT INTO maintenance AS m (tenant_id, pushes_paused, pops_paused)
          VALUES (${tenantId}, COALESCE(${pushes}, false), COALESCE(${pops}, false))
          ON CONFLICT (tenant_id) DO UPDATE
             SET pushes_paused = COALESCE(${pushes}, m.pushes_paused), pops_paused = COALESCE(${pops}, m.pops_paused),
                 updated_at = now()
          RETURNING pushes_paused, pops_paused`,
      ([row]: SwitchRow[]) => ({ pushesPaused: row.pushes_paused, popsPaused: row.pops_paused }),
    );
  }

  /** Every tenant with something paused. */
  paused(): Statement<Array<MaintenanceSwitches & { tenantId: string }>> {
    return statement(
      sql`SELECT tenant_id, pushes_paused, pops_paused FROM maintenance WHERE pushes_paused OR pops_paused`,
      (rows: Array<SwitchRow & { tenant_id: string }>) =>
        rows.map((row) => ({ tenantId: row.tenant_id, pushesPaused: row.pushes_paused, popsPaused: row.pops_paused })),
    );
  }
}
