import { createPrivateKey, createPublicKey, KeyObject, sign as signBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Algorithm, sign, SignOptions } from 'jsonwebtoken';
import { isUuid } from '../common/uuid';
import { JwtConfig } from '../config/app-config';
import { isHmac, keyMismatch } from '../config/jwt-algorithms';
import { Role, ROLES } from './principal';

export const MINT_TOKEN_USAGE = `Usage: npm run token -- --role <role> --tenant <uuid> [--ttl 1h] [--sub <subject>] [--key <pem file>]

Prints a bearer token signed with the broker's configured key (JWT_ALGORITHM,
JWT_SECRET; for RS*, PS*, ES* and EdDSA a private key from --key or
JWT_PRIVATE_KEY), carrying JWT_ISSUER and JWT_AUDIENCE when they are set.
With JWT_JWKS_URL the identity provider issues the tokens, not this command.

  --role    read-only | write-only | read-write | admin; repeat it or give a comma list
  --tenant  the tenant's UUID (the default tenant is 00000000-0000-0000-0000-000000000001)
  --ttl     lifetime such as 90s, 30m, 1h, 7d (default 1h, at most 365d)
  --sub     subject (sub claim), e.g. the service or person the token is for
  --key     PEM private key file for a public-key algorithm (overrides JWT_PRIVATE_KEY)`;

const TTL_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };
const MAX_TTL_SECONDS = 365 * 86_400;

export class MintTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MintTokenError';
  }
}

export interface MintTokenRequest {
  roles: Role[];
  tenant: string;
  ttlSeconds: number;
  subject?: string;
  keyFile?: string;
}

export interface MintedToken {
  token: string;
  claims: Record<string, unknown>;
  expiresAt: Date;
  warnings: string[];
}

export function parseMintTokenArgs(argv: string[]): MintTokenRequest | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        role: { type: 'string', multiple: true },
        tenant: { type: 'string' },
        ttl: { type: 'string' },
        sub: { type: 'string' },
        key: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new MintTokenError((error as Error).message);
  }
  if (values.help) return 'help';

  const roles = parseRoles(values.role ?? []);
  if (values.tenant === undefined) {
    throw new MintTokenError('--tenant is required (the default tenant is 00000000-0000-0000-0000-000000000001)');
  }
  if (!isUuid(values.tenant)) {
    throw new MintTokenError(`--tenant must be a UUID, got "${values.tenant as string}"`);
  }
  if (values.sub !== undefined && values.sub.trim() === '') {
    throw new MintTokenError('--sub must not be empty');
  }
  if (values.key !== undefined && values.key.trim() === '') {
    throw new MintTokenError('--key must name a PEM file');
  }
  return {
    roles,
    tenant: values.tenant.toLowerCase(),
    ttlSeconds: parseTtl(values.ttl ?? '1h'),
    subject: values.sub,
    keyFile: values.key,
  };
}

export function mintToken(request: MintTokenRequest, jwt: JwtConfig, now: Date = new Date()): MintedToken {
  const warnings: string[] = [];
  if (!jwt.enabled) {
    warnings.push('JWT_ENABLED is not true: the broker accepts every request without a token until it is');
  }
  const key = signingKey(request, jwt);
  const claims: Record<string, unknown> = {
    ...(request.roles.length === 1 ? { role: request.roles[0] } : { roles: request.roles }),
    [jwt.tenantClaim]: request.tenant,
  };
  const issuedAt = Math.floor(now.getTime() / 1000);
  const token =
    jwt.algorithm === 'EdDSA'
      ? signEdDsa({ ...claims, ...standardClaims(request, jwt, issuedAt) }, key as KeyObject)
      : sign({ ...claims, iat: issuedAt }, key, {
          algorithm: jwt.algorithm as Algorithm,
          expiresIn: request.ttlSeconds,
          ...(request.subject !== undefined ? { subject: request.subject } : {}),
          ...(jwt.issuer !== undefined ? { issuer: jwt.issuer } : {}),
          ...(jwt.audience !== undefined ? { audience: jwt.audience } : {}),
        } satisfies SignOptions);
  return { token, claims, expiresAt: new Date((issuedAt + request.ttlSeconds) * 1000), warnings };
}

/** What jsonwebtoken's sign options add, for the one algorithm it cannot sign. */
function standardClaims(request: MintTokenRequest, jwt: JwtConfig, issuedAt: number): Record<string, unknown> {
  return {
    iat: issuedAt,
    exp: issuedAt + request.ttlSeconds,
    ...(jwt.audience !== undefined ? { aud: jwt.audience } : {}),
    ...(jwt.issuer !== undefined ? { iss: jwt.issuer } : {}),
    ...(request.subject !== undefined ? { sub: request.subject } : {}),
  };
}

function signEdDsa(payload: Record<string, unknown>, key: KeyObject): string {
  const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const signingInput = `${encode({ alg: 'EdDSA', typ: 'JWT' })}.${encode(payload)}`;
  return `${signingInput}.${signBytes(null, Buffer.from(signingInput), key).toString('base64url')}`;
}

function parseRoles(values: string[]): Role[] {
  const names = values
    .flatMap((value) => value.split(','))
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.length === 0) {
    throw new MintTokenError(`--role is required (${ROLES.join(', ')})`);
  }
  for (const name of names) {
    if (!ROLES.includes(name as Role)) {
      throw new MintTokenError(`unknown role "${name}"; expected one of ${ROLES.join(', ')}`);
    }
  }
  return [...new Set(names as Role[])];
}

function parseTtl(value: string): number {
  const match = /^(\d+)([smhd])$/.exec(value.trim());
  const seconds = match ? Number(match[1]) * TTL_UNITS[match[2]] : NaN;
  if (!Number.isSafeInteger(seconds) || seconds < 1) {
    throw new MintTokenError(`--ttl must be a positive duration such as 90s, 30m, 1h or 7d, got "${value}"`);
  }
  if (seconds > MAX_TTL_SECONDS) {
    throw new MintTokenError(`--ttl must be at most 365d, got "${value}"`);
  }
  return seconds;
}

function signingKey(request: MintTokenRequest, jwt: JwtConfig): string | KeyObject {
  if (jwt.jwks !== undefined) {
    throw new MintTokenError(
      'JWT_JWKS_URL is set: the broker accepts only tokens signed with the identity provider keys; get them there',
    );
  }
  if (isHmac(jwt.algorithm)) {
    if (request.keyFile !== undefined) {
      throw new MintTokenError(
        `--key is for RS* algorithms (and PS*, ES*, EdDSA); JWT_ALGORITHM=${jwt.algorithm} signs with JWT_SECRET`,
      );
    }
    if (!jwt.secret) {
      throw new MintTokenError(`JWT_SECRET is not set; JWT_ALGORITHM=${jwt.algorithm} signs with the broker's secret`);
    }
    return jwt.secret;
  }
  const pem = request.keyFile !== undefined ? readKeyFile(request.keyFile) : jwt.privateKey;
  if (!pem) {
    throw new MintTokenError(
      `JWT_ALGORITHM=${jwt.algorithm} needs a private key: pass --key <pem file> or set JWT_PRIVATE_KEY`,
    );
  }
  const source = request.keyFile !== undefined ? `--key ${request.keyFile}` : 'JWT_PRIVATE_KEY';
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch {
    throw new MintTokenError(`${source} is not a PEM private key`);
  }
  const mismatch = keyMismatch(createPublicKey(privateKey), jwt.algorithm);
  if (mismatch !== undefined) {
    throw new MintTokenError(`${source} ${mismatch.replace(' key', ' private key')}`);
  }
  // A token the broker cannot verify is worse than no token: catch a key mix-up here.
  if (jwt.publicKey && !samePublicKey(privateKey, jwt.publicKey)) {
    throw new MintTokenError(`${source} does not match JWT_PUBLIC_KEY; the broker would refuse the token`);
  }
  return privateKey;
}

function readKeyFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new MintTokenError(`cannot read --key ${path}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
  }
}

function samePublicKey(privateKey: KeyObject, publicPem: string): boolean {
  try {
    const derived = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
    const configured = createPublicKey(publicPem).export({ type: 'spki', format: 'der' });
    return derived.equals(configured);
  } catch {
    return false;
  }
}
