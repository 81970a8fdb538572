export default async function globalTeardown(): Promise<void> {
  await globalThis.__LEASEHOLD_EMBEDDED__?.stop();
  globalThis.__LEASEHOLD_EMBEDDED__ = undefined;
}
