/** At least 1, so each broker serves something; an unknown count means one broker, as before there was a count. */
export function deploymentShare(limit: number, liveBrokers: number | undefined): number {
  if (limit <= 0) return limit;
  const brokers = liveBrokers !== undefined && Number.isFinite(liveBrokers) && liveBrokers >= 1 ? liveBrokers : 1;
  return Math.max(1, Math.ceil(limit / Math.floor(brokers)));
}
