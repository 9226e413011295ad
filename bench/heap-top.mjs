// Reads a V8 .heapprofile (`node --heap-prof dist/bin/feedsync.js sync --once`, a sampling
// profile of allocations) and prints the functions and packages that allocated most.
//   node bench/heap-top.mjs Heap.2026….heapprofile [--top 25]
import { readFileSync } from 'node:fs';
import { isOwn, place, unbundle } from './lib/frames.mjs';

const [file, ...rest] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/heap-top.mjs <file.heapprofile> [--top N]');
  process.exit(2);
}
const top = Number(rest[rest.indexOf('--top') + 1]) || 25;
const profile = JSON.parse(readFileSync(file, 'utf8'));

const byFunction = new Map();
const byPlace = new Map();
// Our own code that the allocation happened under: the nearest frame of ours on the stack.
const byOwnCaller = new Map();
let total = 0;
const walk = (node, ownCaller) => {
  const cf = node.callFrame;
  unbundle(cf);
  const p = place(cf.url);
  const here = isOwn(p) ? `${cf.functionName || '(anonymous)'}  ${p}:${cf.lineNumber + 1}` : ownCaller;
  const self = node.selfSize ?? 0;
  if (self > 0) {
    total += self;
    const key = `${cf.functionName || '(anonymous)'}  ${p}:${cf.lineNumber + 1}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + self);
    byPlace.set(p, (byPlace.get(p) ?? 0) + self);
    byOwnCaller.set(
      here ?? '(outside our code)',
      (byOwnCaller.get(here ?? '(outside our code)') ?? 0) + self,
    );
  }
  for (const child of node.children ?? []) walk(child, here);
};
walk(profile.head, undefined);

const show = (title, map) => {
  console.log(`\n${title}`);
  for (const [k, bytes] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(
      `${(bytes / 2 ** 20).toFixed(1).padStart(8)} MB ${((100 * bytes) / total).toFixed(1).padStart(5)}%  ${k}`,
    );
  }
};
console.log(`${file}: ${(total / 2 ** 20).toFixed(0)} MB sampled`);
show('allocated by function', byFunction);
show('allocated by package or file', byPlace);
show('allocated under our own function (nearest frame of ours)', byOwnCaller);
