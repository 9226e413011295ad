// Reads a V8 .cpuprofile (`node --cpu-prof dist/bin/feedsync.js sync --once`) and prints
// where the time went: the top functions by self time, self time summed by
// package or source file, and time under each of our own functions.
//   node bench/profile-top.mjs CPU.2026….cpuprofile [--top 25]
import { readFileSync } from 'node:fs';
import { isOwn, place, unbundle } from './lib/frames.mjs';

const [file, ...rest] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/profile-top.mjs <file.cpuprofile> [--top N]');
  process.exit(2);
}
const top = Number(rest[rest.indexOf('--top') + 1]) || 25;
const profile = JSON.parse(readFileSync(file, 'utf8'));

for (const node of profile.nodes) unbundle(node.callFrame);

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

// Our own function a sample ran under: the nearest frame of src/ (or dist/) on its stack.
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const ownFrame = (id) => {
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const cf = byId.get(at).callFrame;
    if (isOwn(place(cf.url)))
      return `${cf.functionName || '(anonymous)'}  ${place(cf.url)}:${cf.lineNumber + 1}`;
  }
  return '(no frame of ours: I/O callbacks, timers, GC, idle)';
};

const byFunction = new Map();
const byPlace = new Map();
const byOwn = new Map();
for (const [id, us] of selfUs) {
  const own = ownFrame(id);
  byOwn.set(own, (byOwn.get(own) ?? 0) + us);
  const n = byId.get(id);
  const cf = n.callFrame;
  const key = `${cf.functionName || '(anonymous)'}  ${place(cf.url)}:${cf.lineNumber + 1}`;
  byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  const p = place(cf.url);
  byPlace.set(p, (byPlace.get(p) ?? 0) + us);
}

const show = (title, map) => {
  console.log(`\n${title}`);
  for (const [k, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(
      `${(us / 1000).toFixed(1).padStart(9)} ms ${((100 * us) / totalUs).toFixed(1).padStart(5)}%  ${k}`,
    );
  }
};
console.log(`${file}: ${(totalUs / 1000).toFixed(0)} ms sampled`);
show('self time by function', byFunction);
show('self time by package or file', byPlace);
show('time under our own functions (nearest frame of ours)', byOwn);
