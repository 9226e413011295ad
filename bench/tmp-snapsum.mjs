import { readFileSync } from 'node:fs';
const snap = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const f = snap.snapshot.meta.node_fields; const types = snap.snapshot.meta.node_types[0];
const n = f.length; const nodes = snap.nodes; const strings = snap.strings;
const by = new Map(); let total = 0;
for (let i = 0; i < nodes.length; i += n) {
  const type = types[nodes[i]]; const name = strings[nodes[i + 1]]; const size = nodes[i + 3];
  const key = type === 'object' || type === 'closure' ? `${type}:${name}` : type;
  const e = by.get(key) ?? [0, 0]; e[0] += size; e[1]++; by.set(key, e); total += size;
}
console.log('total', (total / 1048576).toFixed(1), 'MB');
for (const [k, [s, c]] of [...by].sort((a, b) => b[1][0] - a[1][0]).slice(0, 25)) console.log((s / 1048576).toFixed(2).padStart(7), 'MB', String(c).padStart(8), k.slice(0, 80));
