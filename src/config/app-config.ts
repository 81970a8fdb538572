export type JwtAlgorithm = 'HS256' | 'HS384' | 'HS512' | 'RS256' | 'RS384' | 'RS512';

export interface DatabaseConfig {
  /** Unset means: run the embedded PostgreSQL in DATA_DIR. */
  url: string | undefined;
  dataDir: string;
  poolSize: number;
  acquireTimeoutMs: number;
  statementTimeoutMs: number;
}

export interface JwtConfig {
  enabled: boolean;
  algorithm: JwtAlgorithm;
  secret: string | undefined;
  publicKey: string | undefined;
  /** Only `npm run token` reads it (JWT_PRIVATE_KEY), to sign RS* tokens. */
  privateKey?: string;
  issuer: string | undefined;
  audience: string | undefined;
  clockToleranceSeconds: number;
  tenantClaim: string;
}

export interface AppConfig {
  port: number;
  host: string;
  bodyLimitBytes: number;
  shutdownTimeoutMs: number;
  workers: number;
  database: DatabaseConfig;
  jwt: JwtConfig;
  tenantHeader: string | undefined;
  leaseMaxExtendSeconds: number | undefined;
  /** Renewal statements allowed in flight at once; further renewals are grouped behind them. */
  leaseRenewalConcurrency: number;
  /** Most renewals one statement may carry. */
  leaseRenewalBatchSize: number;
  defaultTenantId: string;
}

/** Injection token for the validated configuration. */
export const APP_CONFIG = Symbol('APP_CONFIG');
