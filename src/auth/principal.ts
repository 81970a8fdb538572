export const ROLES = ['read-only', 'write-only', 'read-write', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export interface Principal {
  subject: string | undefined;
  roles: Role[];
  tenantId: string;
}
