import { readFileSync } from 'node:fs';

/*
 * Where the bytes between two heap snapshots went: self size and count by node type and constructor name, largest
 * growth first, divided by a count given (the polls parked between them).
 *
 *   node dist-bench/bench/heap-diff.js before.heapsnapshot after.heapsnapshot [per]
 */

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** Names that say too little by themselves: these are told apart by their holder too. */
const GENERIC = new Set(['', 'Object', 'system / Context', 'Array', 'Promise', 'Map', 'native_bind']);

function totals(path: string): Map<string, { bytes: number; count: number }> {
  const { snapshot, nodes, strings } = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
  const fields = snapshot.meta.node_fields;
  const types = snapshot.meta.node_types[0];
  const [type, name, size] = ['type', 'name', 'self_size'].map((field) => fields.indexOf(field));
  const { edges } = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
  const edgeFields = snapshot.meta.edge_fields;
  const edgeTypes = snapshot.meta.edge_types[0];
  const edgeCount = fields.indexOf('edge_count');
  const [edgeType, edgeName, edgeTo] = ['type', 'name_or_index', 'to_node'].map((field) => edgeFields.indexOf(field));
  // Unnamed nodes (arrays, contexts, hidden) are told apart by what holds them: the first retainer's name and edge.
  const holder = new Map<number, string>();
  let edge = 0;
  for (let index = 0; index < nodes.length; index += fields.length) {
    const owner = strings[nodes[index + name]].slice(0, 40);
    for (let count = 0; count < nodes[index + edgeCount]; count += 1, edge += edgeFields.length) {
      const to = edges[edge + edgeTo];
      if (holder.has(to)) continue;
      const kindOfEdge = edgeTypes[edges[edge + edgeType]];
      const label =
        kindOfEdge === 'element' || kindOfEdge === 'hidden'
          ? `[${edges[edge + edgeName]}]`
          : strings[edges[edge + edgeName]];
      holder.set(to, `${types[nodes[index + type]]}:${owner}.${kindOfEdge === 'element' ? '[]' : label}`);
    }
  }
  const out = new Map<string, { bytes: number; count: number }>();
  for (let index = 0; index < nodes.length; index += fields.length) {
    const kind = types[nodes[index + type]];
    const own = strings[nodes[index + name]];
    const named = (kind === 'object' || kind === 'native' || kind === 'closure') && !GENERIC.has(own);
    const label = named ? own : `${own} < ${holder.get(index) ?? '?'}`;
    const key = `${kind} ${label.slice(0, 90)}`;
    const entry = out.get(key) ?? { bytes: 0, count: 0 };
    entry.bytes += nodes[index + size];
    entry.count += 1;
    out.set(key, entry);
  }
  return out;
}

const [beforePath, afterPath, perText] = process.argv.slice(2);
const per = Number(perText ?? 1);
const before = totals(beforePath);
const after = totals(afterPath);
const rows = [...after].map(([key, { bytes, count }]) => ({
  key,
  bytes: bytes - (before.get(key)?.bytes ?? 0),
  count: count - (before.get(key)?.count ?? 0),
}));
rows.sort((a, b) => b.bytes - a.bytes);
let total = 0;
for (const row of rows) total += row.bytes;
console.log(`total growth ${(total / per).toFixed(0)} B per unit`);
for (const row of rows.slice(0, 70)) {
  console.log(
    `${(row.bytes / per).toFixed(0).padStart(7)} B  ${(row.count / per).toFixed(2).padStart(7)} ×  ${row.key}`,
  );
}
