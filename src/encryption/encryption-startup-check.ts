import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { TransactionRunner } from '../database/transaction-runner';
import { EncryptionKeysRepository } from './encryption-keys.repository';
import { PayloadCipher } from './payload-cipher';

/** Thrown before the broker listens: it names what is missing and what to set. */
export class EncryptionStartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EncryptionStartupError';
  }
}

/**
 * A broker that could not open what it stores refuses to start, rather than answering every pop of an encrypted
 * queue with errors: a queue has encryptionEnabled and no key is set, or stored payloads name a key id that is not.
 */
@Injectable()
export class EncryptionStartupCheck implements OnModuleInit {
  private readonly logger = new Logger('Encryption');

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly keys: EncryptionKeysRepository,
    private readonly cipher: PayloadCipher,
  ) {}

  async onModuleInit(): Promise<void> {
    const inUse = await this.transactions.runOne(undefined, this.keys.inUse());
    const problem = startupProblem(inUse.encryptedQueue, inUse.keyIds, this.cipher.keyIds());
    if (problem) throw new EncryptionStartupError(problem);
    if (this.cipher.enabled) {
      this.logger.log(
        `Encryption keys ${this.cipher.keyIds().join(', ')}; new payloads sealed under ${this.cipher.primaryKeyId}`,
      );
    }
  }
}

export function startupProblem(
  encryptedQueue: string | undefined,
  storedKeyIds: string[],
  configured: string[],
): string | undefined {
  if (configured.length === 0 && (encryptedQueue !== undefined || storedKeyIds.length > 0)) {
    const why =
      encryptedQueue !== undefined
        ? `queue "${encryptedQueue}" has encryptionEnabled`
        : `stored payloads are encrypted under key ${storedKeyIds.join(', ')}`;
    return `${why} but no encryption key is configured: set ENCRYPTION_KEYS (or QUEEN_ENCRYPTION_KEY)`;
  }
  const missing = storedKeyIds.filter((id) => !configured.includes(id));
  if (missing.length > 0) {
    return (
      `stored payloads are encrypted under key ${missing.join(', ')}, which ENCRYPTION_KEYS does not hold: keep it ` +
      'there, after the key new payloads use, until `npm run reencrypt` has moved them (docs/operations.md)'
    );
  }
  return undefined;
}
