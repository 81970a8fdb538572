/// <reference types="node" preserve="true" />
export { LeaseholdClient } from './leasehold-client';
export { LeaseholdError } from './leasehold-error';
export * from './types';
