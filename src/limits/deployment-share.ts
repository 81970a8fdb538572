/**
 * Never less than 1, so a small limit spread over many brokers still lets each serve something. An unknown count
 * is taken as one broker: the whole limit, as a lone process enforced it before there was a count.
 */
export function deploymentShare(limit: number, liveBrokers: number | undefined): number {
  if (limit <= 0) return limit;
  const brokers = liveBrokers !== undefined && Number.isFinite(liveBrokers) && liveBrokers >= 1 ? liveBrokers : 1;
  return Math.max(1, Math.ceil(limit / Math.floor(brokers)));
}
