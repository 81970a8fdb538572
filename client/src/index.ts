/// <reference types="node" preserve="true" />
export { consume } from './consume';
export type { ConsumeContext, ConsumeHandler, ConsumeOptions, ConsumeStage, ConsumerClient } from './consume';
export { LeaseKeeper } from './lease-keeper';
export type { LeaseEndingNotice, LeaseExtender, LeaseKeeperOptions } from './lease-keeper';
export { LeaseLostError } from './lease-lost-error';
export type { LeaseLossKind } from './lease-lost-error';
export { LeaseholdClient } from './leasehold-client';
export { LeaseholdError } from './leasehold-error';
export { Transaction, TransactionFailedError } from './transaction';
export type { TransactionAckOptions, TransactionPushItem, TransactionSender } from './transaction';
export * from './types';
