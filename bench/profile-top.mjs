// Reads a V8 .cpuprofile (`node --cpu-prof dist/bin/feedsync.js sync --once`) and prints
// where the time went: the top functions by self time, self time summed by
// package or source file, and time under each of our own functions.
//   node bench/profile-top.mjs CPU.2026….cpuprofile [--top 25]
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const [file, ...rest] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/profile-top.mjs <file.cpuprofile> [--top N]');
  process.exit(2);
}
const top = Number(rest[rest.indexOf('--top') + 1]) || 25;
const profile = JSON.parse(readFileSync(file, 'utf8'));

// The CLI is a bundle (dist/bin/): its frames are mapped back through the source maps
// beside it to the file they came from, our own or a package's.
const maps = new Map();
function mapOf(url) {
  if (!maps.has(url)) {
    const path = url.startsWith('file://') ? fileURLToPath(url) : url;
    maps.set(
      url,
      existsSync(`${path}.map`)
        ? { dir: dirname(path), map: new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8'))) }
        : null,
    );
  }
  return maps.get(url);
}
for (const node of profile.nodes) {
  const cf = node.callFrame;
  const found = cf.url?.includes('/dist/bin/') ? mapOf(cf.url) : null;
  const entry = found?.map.findEntry(cf.lineNumber, cf.columnNumber);
  if (entry?.originalSource) {
    cf.url = resolve(found.dir, entry.originalSource);
    cf.lineNumber = entry.originalLine;
  }
}

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

/** node_modules/<package> or the path below the project, for grouping. */
function place(url) {
  if (!url) return '(native/internal)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  if (url.startsWith('node:')) return url;
  const own = /\/(dist|bench|src)\/(.*)$/.exec(url);
  return own ? `${own[1]}/${own[2]}` : url;
}

// Our own function a sample ran under: the nearest frame of src/ (or dist/) on its stack.
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const ownFrame = (id) => {
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const cf = byId.get(at).callFrame;
    if (/^(dist|src)\//.test(place(cf.url)))
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
