import { ScenarioResult } from './common';

export async function tenants(): Promise<ScenarioResult> {
  throw new Error('not written yet');
}
