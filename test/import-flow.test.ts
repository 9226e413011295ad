import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Imports follow the flow (docs/ARCHITECTURE.md, "Imports"): a module imports its own
// layer or a lower one, and no chain of imports (types included) comes back to where
// it started. `npx vitest run test/import-flow.test.ts` checks src/.

const SRC = new URL('../src/', import.meta.url).pathname;

/** Layers from the top; a file's layer is its folder's (or, at the top of src/, its own). */
const LAYERS: readonly (readonly string[])[] = [
  ['cli.ts', 'cli', 'index.ts'],
  ['doctor', 'simulator'],
  ['sync', 'webhooks', 'consumer'],
  ['compose'],
  ['metrics'],
  ['queue'],
  ['store', 'redis'],
  ['feed', 'api', 'budget'],
  ['config', 'logger.ts', 'scrub.ts', 'tracing'],
  [
    'errors.ts',
    'error-codes.ts',
    'error-summary.ts',
    'event-types.ts',
    'shell-quote.ts',
    'sleep.ts',
    'deadline.ts',
    'edit-distance.ts',
  ],
];

/**
 * The store and the queue keep and move events; they do not talk to the service, so
 * of api/ they import the event's type only.
 */
const API_TYPES_ONLY = ['store', 'queue'];

function layerOf(file: string): number {
  const top = file.split('/')[0] ?? file;
  const i = LAYERS.findIndex((names) => names.includes(top));
  if (i < 0) throw new Error(`src/${file} is in no layer: add its folder to LAYERS`);
  return i;
}

/** Every relative import of every module under src/, static, dynamic or re-export. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  for (const file of files.map((f) => f.split('\\').join('/'))) {
    const info = ts.preProcessFile(readFileSync(join(SRC, file), 'utf8'), true, true);
    const targets = info.importedFiles
      .map((i) => i.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => posix.normalize(posix.join(dirname(file), spec)).replace(/\.js$/, '.ts'));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** The cycles of the graph: its strongly connected components of more than one file. */
function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v) ?? 0);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string | undefined;
      do {
        w = stack.pop();
        if (w === undefined) break;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('imports follow the flow', () => {
  const graph = importGraph();
  const edges = [...graph].flatMap(([from, tos]) => tos.map((to) => `${from} -> ${to}`));

  it('every import names a module that exists', () => {
    expect(edges.filter((e) => !graph.has(e.split(' -> ')[1] ?? ''))).toEqual([]);
  });

  it('no import cycle, type imports included', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('no import runs against the flow', () => {
    const upward = edges.filter((e) => {
      const [from = '', to = ''] = e.split(' -> ');
      const apiBeyondTypes =
        API_TYPES_ONLY.includes(from.split('/')[0] ?? '') && to.startsWith('api/') && to !== 'api/types.ts';
      return layerOf(to) < layerOf(from) || apiBeyondTypes;
    });
    expect(upward).toEqual([]);
  });
});

/** What a run of the CLI does not load until a command needs it: the drivers and clients. */
const HEAVY = ['pg', 'kysely', 'undici', 'bullmq', 'ioredis', 'prom-client', '@opentelemetry/sdk-trace-node'];

/** The package an import specifier names: `@scope/name` or `name`, without a subpath. */
const packageOf = (spec: string): string =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');

/** The packages `file` loads when it runs, through its static value imports (type imports are erased). */
function packagesLoaded(file: string, seen = new Set<string>()): Set<string> {
  const found = new Set<string>();
  if (seen.has(file)) return found;
  seen.add(file);
  const text = readFileSync(join(SRC, file), 'utf8');
  for (const [, spec = ''] of text.matchAll(/^(?:import|export) (?!type )[^;]*? from '([^']+)';/gms)) {
    if (spec.startsWith('.')) {
      const target = posix.normalize(posix.join(dirname(file), spec)).replace(/\.js$/, '.ts');
      for (const p of packagesLoaded(target, seen)) found.add(p);
    } else if (!spec.startsWith('node:')) found.add(spec);
  }
  return found;
}

describe('a command loads lazily only what start-up does not', () => {
  // `--help` and a caught-up `sync --once` start fast because the drivers load inside
  // the action that needs them; anything lighter is imported at the top of the file.
  it('every import() under src/cli loads a driver or a client', () => {
    const files = readdirSync(join(SRC, 'cli'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `cli/${f.split('\\').join('/')}`);
    const lazy = files.flatMap((file) =>
      [...readFileSync(join(SRC, file), 'utf8').matchAll(/\bimport\('(\.[^']+)'\)/g)].map(
        ([, spec = '']) =>
          `${file} -> ${posix.normalize(posix.join(dirname(file), spec)).replace(/\.js$/, '.ts')}`,
      ),
    );
    // Not a check of nothing: the commands do load their drivers lazily.
    expect(lazy.length).toBeGreaterThan(10);
    const light = lazy.filter((edge) => {
      const target = edge.split(' -> ')[1] ?? '';
      return ![...packagesLoaded(target)].some((p) => HEAVY.includes(packageOf(p)));
    });
    expect(light).toEqual([]);
  });
});
