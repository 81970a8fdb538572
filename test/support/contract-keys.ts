/** The keys of a message as the contract lists them for a pop, in order; the message listing shows the same. */
export const MESSAGE_KEYS = [
  'id',
  'transactionId',
  'traceId',
  'data',
  'producerSub',
  'createdAt',
  'partitionId',
  'partition',
  'leaseId',
  'consumerGroup',
  'deliveryAttempt',
  'leaseEpoch',
];
