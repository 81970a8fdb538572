#!/usr/bin/env bash
# Checks @leasehold/client as a user gets it: packs client/, installs the tarball into a scratch
# project outside the repository, runs a producer/consumer from it against a broker built from
# this repository, and typechecks a TypeScript file against the shipped declarations.
#
# Usage: scripts/client-package-check.sh   (after `npm ci`, which builds the broker; rebuild
# with `npm run build` after changing src/). Uses DATABASE_URL when set, otherwise the embedded
# database in a temporary directory.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/leasehold-client-check.XXXXXX")
BROKER_PID=
started=$(date +%s)

cleanup() {
  local status=$?
  if [[ -n $BROKER_PID ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    for _ in $(seq 1 150); do
      kill -0 "$BROKER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$BROKER_PID" 2>/dev/null || true
  fi
  [[ -n $BROKER_PID ]] && { wait "$BROKER_PID" 2>/dev/null || true; }
  if ((status != 0)) && [[ -s $WORK/broker.log ]]; then
    echo '--- broker log (last 40 lines) ---' >&2
    tail -n 40 "$WORK/broker.log" >&2
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
  echo "client package check: $*" >&2
  exit 1
}

echo '== @leasehold/client: pack, install the tarball, run it against the broker =='

# --- pack -------------------------------------------------------------------------------------
mkdir "$WORK/pack"
# prepack rebuilds client/dist from scratch, so the tarball never carries stale files.
(cd "$ROOT/client" && npm pack --silent --pack-destination "$WORK/pack" >/dev/null)
tarballs=("$WORK"/pack/*.tgz)
((${#tarballs[@]} == 1)) && [[ -f ${tarballs[0]} ]] || fail "npm pack made no single tarball"
TARBALL=${tarballs[0]}

# Only dist (JavaScript, declarations, maps) and the manifest and README.
contents=$(tar -tzf "$TARBALL")
unexpected=$(grep -Ev '^package/(package\.json|README\.md|dist/[^/]+\.(js|js\.map|d\.ts))$' <<<"$contents" || true)
[[ -z $unexpected ]] || fail "unexpected files in the tarball:"$'\n'"$unexpected"
for required in package/dist/index.js package/dist/index.d.ts; do
  grep -qx "$required" <<<"$contents" || fail "$required missing from the tarball"
done

# --- scratch project --------------------------------------------------------------------------
APP=$WORK/app
mkdir "$APP"
cat >"$APP/package.json" <<'EOF'
{ "name": "leasehold-client-check", "version": "0.0.0", "private": true }
EOF
# Offline with an empty cache: the package must need nothing from a registry. No scripts: the
# tarball must work as shipped, also where install scripts are not allowed.
(cd "$APP" && npm install --offline --ignore-scripts --no-audit --no-fund --loglevel=error \
  --cache "$WORK/npm-cache" "$TARBALL" >/dev/null)
INSTALLED=$APP/node_modules/@leasehold/client
[[ -d $INSTALLED && ! -L $INSTALLED ]] || fail "the tarball was not installed as a plain directory"

cat >"$APP/consumer.cjs" <<'EOF'
'use strict';
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { LeaseholdClient, LeaseLostError, consume } = require('@leasehold/client');

const PARTITIONS = ['p0', 'p1'];
const PER_PARTITION = 10;
const LEASE_SECONDS = 2;
const queue = `client-package-check-${process.pid}-${Date.now()}`;

async function main() {
  assert.ok(require.resolve('@leasehold/client').startsWith(__dirname), 'resolved outside the scratch project');
  const client = new LeaseholdClient({ baseUrl: process.env.LEASEHOLD_URL, timeoutMs: 10_000 });

  const items = [];
  for (let seq = 0; seq < PER_PARTITION; seq += 1) {
    for (const partition of PARTITIONS) {
      items.push({ queue, partition, payload: { partition, seq }, transactionId: `${partition}-${seq}` });
    }
  }
  const pushed = await client.push(items);
  assert.deepEqual(pushed.map((result) => result.status), items.map(() => 'queued'));

  const seen = new Map(PARTITIONS.map((partition) => [partition, []]));
  const problems = [];
  const stop = new AbortController();
  let timedOut = false;
  const overall = setTimeout(() => {
    timedOut = true;
    stop.abort();
  }, 60_000);
  let received = 0;
  let slowBatchDone = false;
  await consume(queue, async (messages, { signal }) => {
    if (!slowBatchDone) {
      // Outlive the lease once: only the keeper's renewals keep this batch ours.
      await sleep(LEASE_SECONDS * 1000 + 500, undefined, { signal });
      slowBatchDone = true;
    }
    for (const { partition, data } of messages) {
      assert.equal(data.partition, partition);
      seen.get(partition).push(data.seq);
    }
    received += messages.length;
    if (received >= items.length) stop.abort();
  }, {
    client,
    signal: stop.signal,
    leaseSeconds: LEASE_SECONDS,
    batch: 3,
    concurrency: 2,
    waitTimeoutMs: 1_000,
    onLeaseLost: (error) => problems.push(`lease lost: ${error.message}`),
    onError: (error, stage) => problems.push(`${stage}: ${error?.message ?? error}`),
  });
  clearTimeout(overall);
  if (timedOut) problems.push(`timed out after ${received} of ${items.length} messages`);
  assert.deepEqual(problems, []);

  const expected = Array.from({ length: PER_PARTITION }, (_, seq) => seq);
  for (const partition of PARTITIONS) {
    assert.deepEqual(seen.get(partition), expected, `partition ${partition}: once each, in order`);
  }
  // Had an ack not landed, its batch would be poppable again once its lease ran out.
  await sleep(LEASE_SECONDS * 1000 + 500);
  assert.equal(await client.pop(queue, { batch: 100 }), null, 'messages left after every ack');

  assert.ok(new LeaseLostError('lease', 'not-renewed') instanceof Error);
  console.log(`consumed ${received} messages over ${PARTITIONS.length} partitions, once each and in order`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
EOF

cat >"$APP/esm.mjs" <<'EOF'
import assert from 'node:assert/strict';
import { LeaseholdClient, LeaseKeeper, consume } from '@leasehold/client';

assert.equal(typeof LeaseholdClient, 'function');
assert.equal(typeof LeaseKeeper, 'function');
assert.equal(typeof consume, 'function');
assert.match(import.meta.resolve('@leasehold/client/package.json'), /node_modules\/@leasehold\/client\/package\.json$/);
EOF

cat >"$APP/types.ts" <<'EOF'
import { LeaseholdClient, LeaseLostError, consume, type LeaseLossKind, type Message, type PopResponse } from '@leasehold/client';

const client: LeaseholdClient = new LeaseholdClient({ baseUrl: 'http://127.0.0.1:6632', timeoutMs: 1_000 });
const popped: Promise<PopResponse<{ seq: number }> | null> = client.pop<{ seq: number }>('jobs', { wait: true });
const seqs = (messages: Message<{ seq: number }>[]): number[] => messages.map((message) => message.data.seq);
const kind: LeaseLossKind = new LeaseLostError('lease', 'not-renewed').kind;
const done: Promise<void> = consume<{ seq: number }>('jobs', (messages, { signal }) => {
  signal.throwIfAborted();
  seqs(messages);
}, { client, leaseSeconds: 30 });

// @ts-expect-error baseUrl is required: the declarations are real, not `any`.
new LeaseholdClient({});
// @ts-expect-error a message's data has the declared type.
const wrong: Message<{ seq: number }>['data']['seq'] = 'one';

export { popped, kind, done, wrong };
EOF

cat >"$APP/esm-types.mts" <<'EOF'
import { LeaseholdClient, type Message } from '@leasehold/client';

export const client = new LeaseholdClient({ baseUrl: 'http://127.0.0.1:6632' });
export type Seq = Message<{ seq: number }>;
EOF

# The README's first example, as a user copies it: it must compile with nothing left undefined.
awk '/^## A consumer with a slow handler/ { found = 1 } found && /^```ts/ { inside = 1; next }
  inside && /^```/ { exit } inside { print }' "$ROOT/client/README.md" >"$APP/readme-example.mts"
[[ -s $APP/readme-example.mts ]] || fail "the README's consumer example was not found"

# The shipped declarations reference Node's types, as any Node TypeScript project has them.
cat >"$APP/tsconfig.json" <<EOF
{
  "compilerOptions": {
    "module": "node16",
    "moduleResolution": "node16",
    "target": "ES2022",
    "lib": ["ES2022"],
    "strict": true,
    "skipLibCheck": false,
    "noEmit": true,
    "typeRoots": ["$ROOT/node_modules/@types"],
    "types": ["node"]
  },
  "files": ["types.ts", "esm-types.mts", "readme-example.mts"]
}
EOF

(cd "$APP" && "$ROOT/node_modules/.bin/tsc" -p tsconfig.json) || fail "the shipped types do not typecheck"
(cd "$APP" && node esm.mjs) || fail "the package does not load from ESM"

# --- broker -----------------------------------------------------------------------------------
if [[ ! -f $ROOT/dist/src/main.js ]]; then
  (cd "$ROOT" && npm run build --silent)
fi
PORT=$(node -e "const s = require('node:net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })")
broker_env=(PORT="$PORT" HOST=127.0.0.1 DATA_DIR="$WORK/pglite" JWT_ENABLED=false
  LOG_LEVEL=warn LOG_REQUESTS=false SHUTDOWN_TIMEOUT_MS=2000)
[[ -n ${DATABASE_URL:-} ]] || broker_env=(-u DATABASE_URL "${broker_env[@]}")
(cd "$ROOT" && exec env "${broker_env[@]}" node dist/src/main.js) >"$WORK/broker.log" 2>&1 &
BROKER_PID=$!

URL=http://127.0.0.1:$PORT
for _ in $(seq 1 240); do
  kill -0 "$BROKER_PID" 2>/dev/null || fail "the broker exited during startup"
  node -e "fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))" \
    "$URL/health/ready" && break
  sleep 0.25
done
node -e "fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))" \
  "$URL/health/ready" || fail "the broker was not ready within 60 s"

(cd "$APP" && LEASEHOLD_URL=$URL node consumer.cjs) || fail "producer/consumer failed"
echo "client package check passed in $(($(date +%s) - started)) s ($(basename "$TARBALL"))"
