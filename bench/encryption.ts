import { performance } from 'node:perf_hooks';
import { AppConfig } from '../src/config/app-config';
import { parseEncryptionKeys } from '../src/encryption/encryption-keys';
import { PayloadCipher } from '../src/encryption/payload-cipher';

/**
 * `npm run bench:encryption`: what sealing and opening one payload cost the broker's CPU, per message, for payloads
 * of a few sizes; the push and pop paths add exactly one of each per message of an encrypted queue.
 */
const SIZES = [100, 1_024, 16 * 1_024, 256 * 1_024];
const ROUNDS = 5;

function payload(bytes: number): string {
  return JSON.stringify({ text: 'x'.repeat(Math.max(0, bytes - 11)) });
}

function microsPer(work: () => void, iterations: number): number {
  for (let i = 0; i < Math.min(iterations, 1_000); i += 1) work();
  const times: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const started = performance.now();
    for (let i = 0; i < iterations; i += 1) work();
    times.push(((performance.now() - started) * 1_000) / iterations);
  }
  return times.sort((a, b) => a - b)[Math.floor(ROUNDS / 2)];
}

const cipher = new PayloadCipher({
  encryptionKeys: parseEncryptionKeys(`bench:${'ab'.repeat(32)}`, undefined, []),
} as unknown as AppConfig);
console.log('| payload bytes | stored bytes | seal µs | open µs |');
console.log('| ---: | ---: | ---: | ---: |');
for (const size of SIZES) {
  const json = payload(size);
  const sealed = cipher.seal(json);
  const iterations = Math.max(200, Math.floor(20_000_000 / size));
  const seal = microsPer(() => cipher.seal(json), iterations);
  const open = microsPer(() => cipher.open(sealed.keyId, sealed.json), iterations);
  console.log(`| ${json.length} | ${Buffer.byteLength(sealed.json)} | ${seal.toFixed(2)} | ${open.toFixed(2)} |`);
}
