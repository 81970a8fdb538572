/**
 * The ids Swagger UI's example bodies share, so that the examples read as one walk-through: a push of order 42, its
 * pop's lease, its ack. Executed as they are, none is refused as bad input (test/docs.e2e-spec.ts sends each).
 */
export const EXAMPLE_QUEUE = 'orders';
export const EXAMPLE_PARTITION = 'customer-42';
export const EXAMPLE_TRANSACTION_ID = 'order-42-created';
export const EXAMPLE_PARTITION_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92';
export const EXAMPLE_LEASE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91';
