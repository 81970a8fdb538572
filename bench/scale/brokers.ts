import { ScenarioResult } from './common';

export async function brokers(): Promise<ScenarioResult> {
  throw new Error('not written yet');
}
