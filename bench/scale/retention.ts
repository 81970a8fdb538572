import { ScenarioResult } from './common';

export async function retention(): Promise<ScenarioResult> {
  throw new Error('not written yet');
}
