import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A key id the tenant's stored payloads may be sealed under (EncryptionKeysRepository). */
@Entity({ name: 'tenant_encryption_keys' })
export class TenantEncryptionKeyEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_tenant_encryption_keys' })
  tenantId: string;

  @PrimaryColumn({ name: 'key_id', type: 'text', primaryKeyConstraintName: 'pk_tenant_encryption_keys' })
  keyId: string;

  @Column({ name: 'recorded_at', type: 'timestamptz', default: () => 'now()' })
  recordedAt: Date;
}
