import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { EncryptionKey } from './encryption-keys';

const ALGORITHM = 'aes-256-gcm';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A stored payload that does not open: its key id is not configured, or the text was altered. */
export class UnreadablePayloadError extends Error {
  constructor(reason: string) {
    super(`payload cannot be decrypted: ${reason}`);
    this.name = 'UnreadablePayloadError';
  }
}

/** What a sealed payload is stored as: the payload column's JSON text and the key id beside it. */
export interface SealedPayload {
  json: string;
  keyId: string;
}

/**
 * AES-256-GCM with a random 12-byte IV per payload. The payload column stays `json`: a sealed payload is the JSON
 * string of base64(iv | tag | ciphertext), and `key_id` beside it says it is sealed and under which key (null: plain).
 */
@Injectable()
export class PayloadCipher {
  private readonly logger = new Logger('Encryption');
  private readonly keys: Map<string, Buffer>;
  private readonly primary: EncryptionKey | undefined;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.keys = new Map(config.encryptionKeys.map(({ id, key }) => [id, key]));
    this.primary = config.encryptionKeys[0];
  }

  get enabled(): boolean {
    return this.primary !== undefined;
  }

  /** The id new payloads are sealed under; undefined when no key is configured. */
  get primaryKeyId(): string | undefined {
    return this.primary?.id;
  }

  keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /** `json` is the payload's JSON text as the producer sent it. */
  seal(json: string): SealedPayload {
    const primary = this.primary;
    if (!primary) throw new Error('no encryption key is configured');
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, primary.key, iv);
    const sealed = Buffer.concat([iv, Buffer.alloc(TAG_BYTES), cipher.update(json, 'utf8'), cipher.final()]);
    cipher.getAuthTag().copy(sealed, IV_BYTES);
    return { json: `"${sealed.toString('base64')}"`, keyId: primary.id };
  }

  /** The payload's JSON text: `stored` itself when `keyId` is null (not sealed). */
  open(keyId: string | null, stored: string): string {
    if (keyId === null) return stored;
    const key = this.keys.get(keyId);
    if (!key) throw new UnreadablePayloadError(`key ${keyId} is not configured`);
    const sealed = Buffer.from(stored.slice(1, -1), 'base64');
    if (stored[0] !== '"' || sealed.length < IV_BYTES + TAG_BYTES) {
      throw new UnreadablePayloadError('the stored text is not a sealed payload');
    }
    try {
      const decipher = createDecipheriv(ALGORITHM, key, sealed.subarray(0, IV_BYTES));
      decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES), undefined, 'utf8') + decipher.final('utf8');
    } catch {
      throw new UnreadablePayloadError(`it does not authenticate under key ${keyId}`);
    }
  }

  /**
   * For a route answering many messages: an unreadable one is answered with data null and `error`, and logged,
   * rather than failing the whole answer (docs/operations.md, "Encryption at rest").
   */
  openOrReport(keyId: string | null, stored: string, messageId: string): { json: string; error?: string } {
    if (keyId === null) return { json: stored };
    try {
      return { json: this.open(keyId, stored) };
    } catch (error) {
      if (!(error instanceof UnreadablePayloadError)) throw error;
      this.logger.warn(`Message ${messageId}: ${error.message}`);
      return { json: 'null', error: error.message };
    }
  }
}
